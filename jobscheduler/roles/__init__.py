"""The roles: the scheduler, the executor, the reaper and the presence beat. Each is an ``async def
run_<role>(deps, task_status=...)`` over the ports it receives in
:class:`~jobscheduler.roles.deps.Deps`; none imports an adapter."""
