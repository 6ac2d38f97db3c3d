"""Workflows: sets of jobs with dependencies (see DESIGN.md, "A workflow is jobs with
dependencies, not a second engine").

The record (:mod:`._record`) and the validation of a create (:mod:`._request`); a step's link
to its workflow is :class:`jobscheduler.domain.steps.Step`, and every move of a step or of a
record is a transition of :mod:`jobscheduler.domain.states`.
"""

from ._record import FINISHED as FINISHED
from ._record import LISTED as LISTED
from ._record import OUTCOMES as OUTCOMES
from ._record import UNFINISHED_STEPS as UNFINISHED_STEPS
from ._record import WORKFLOW_TIME_FIELDS as WORKFLOW_TIME_FIELDS
from ._record import DeclaredStep as DeclaredStep
from ._record import Workflow as Workflow
from ._record import WorkflowStatus as WorkflowStatus
from ._record import steps_to_json as steps_to_json
from ._record import workflow_to_json as workflow_to_json
from ._request import MAX_STEP_NAME as MAX_STEP_NAME
from ._request import MAX_WORKFLOW_KEY as MAX_WORKFLOW_KEY
from ._request import WorkflowPlan as WorkflowPlan
from ._request import parse_workflow_request as parse_workflow_request
from ._request import same_shape as same_shape
