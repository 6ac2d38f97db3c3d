"""One try of one webhook delivery: a signed JSON POST through the ``http`` handler's
address guard.

The request goes out as the ``http`` job type's do (:mod:`jobscheduler.handlers.netguard`,
:mod:`jobscheduler.handlers.guarded_transport`): the webhook's host is resolved, every
address checked, and the connection made to the address checked; an internal address is
refused unless ``HTTP_ALLOWLIST`` names it, before anything is sent. Redirects are not
followed (a receiver that moved is a failure to fix, not a hop to trust). The headers:

- ``Content-Type: application/json``;
- ``X-Jobscheduler-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``;
- ``X-Jobscheduler-Event`` (the event type) and ``X-Jobscheduler-Delivery`` (the delivery
  id, the same on every retry: a receiver's deduplication key).
"""

from __future__ import annotations

import ssl

import attrs
import httpcore
import httpx
import trio

from jobscheduler.domain.addresses import Allowlist
from jobscheduler.domain.notifications import SIGNATURE_HEADER, Delivery, Webhook, signature
from jobscheduler.errors import AddressRefused, ResolveError
from jobscheduler.handlers.guarded_transport import GuardedTransport
from jobscheduler.handlers.netguard import AddressGuard, Resolver, system_resolver

#: Bound of one try (connect, send, answer).
DELIVERY_TIMEOUT = 10.0
USER_AGENT = "jobscheduler-webhooks"


@attrs.frozen
class TryResult:
    """What one try got: the status (None: no answer), why it failed, and whether retrying
    could help (``permanent``: the address is refused)."""

    status: int | None
    error: str | None = None
    permanent: bool = False


@attrs.define(kw_only=True)
class WebhookSender:
    guard: AddressGuard = attrs.field(factory=AddressGuard)
    timeout: float = DELIVERY_TIMEOUT
    network_backend: httpcore.AsyncNetworkBackend | None = None
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def from_allowlist(
        cls, allowlist: tuple[str, ...], *, resolver: Resolver = system_resolver
    ) -> WebhookSender:
        """A sender whose guard allows what ``HTTP_ALLOWLIST`` allows."""
        return cls(guard=AddressGuard(allowlist=Allowlist.parse(allowlist), resolver=resolver))

    async def send(self, webhook: Webhook, delivery: Delivery, *, now: int) -> TryResult:
        """POST the delivery's body to the webhook, signed at ``now`` (unix seconds)."""
        if self.ssl_context is None:
            self.ssl_context = httpx.create_ssl_context(trust_env=False)
        body = delivery.body.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            SIGNATURE_HEADER: signature(webhook.secret, now, body),
            "X-Jobscheduler-Event": delivery.event_type.value,
            "X-Jobscheduler-Delivery": delivery.id,
        }
        transport = GuardedTransport(
            self.guard, ssl_context=self.ssl_context, network_backend=self.network_backend
        )
        target = str(httpx.URL(webhook.url).copy_with(query=None, fragment=None))
        try:
            with trio.fail_after(self.timeout):
                async with httpx.AsyncClient(
                    transport=transport,
                    follow_redirects=False,
                    timeout=httpx.Timeout(self.timeout),
                    trust_env=False,
                ) as client:
                    response = await client.post(webhook.url, content=body, headers=headers)
        except AddressRefused as exc:
            return TryResult(None, f"refused: {exc}", permanent=True)
        except (trio.TooSlowError, httpx.TimeoutException):
            return TryResult(None, f"timed out after {self.timeout:g}s")
        except ResolveError as exc:
            return TryResult(None, str(exc))
        except httpx.HTTPError as exc:
            return TryResult(None, f"{type(exc).__name__} on {target}: {exc}")
        if 200 <= response.status_code < 300:
            return TryResult(response.status_code)
        return TryResult(response.status_code, f"{target} answered {response.status_code}")
