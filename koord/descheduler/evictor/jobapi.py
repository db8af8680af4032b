"""The migration controller's writes: PodMigrationJobs (create, update, status, delete), Reservations
(create, delete) and the full pod a Reservation is templated from. Each is one request with its own
timeout; errors are the client's (:class:`ApiError`, :class:`APIUnavailable`), left to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordshared.apis.core.pod import as_map
from koordshared.apis.meta import groups
from koordshared.kube.client import ApiError, request

REQUEST_TIMEOUT = 5.0
JOBS = groups.POD_MIGRATION_JOBS
RESERVATIONS = groups.RESERVATIONS


def _name(obj: Mapping[str, Any]) -> str:
    return str(as_map(obj, "metadata").get("name") or "")


class JobAPI:
    def __init__(self, client: Any) -> None:
        self.client = client

    def _call(self, what: str, method: str, path: str, body: Any = None) -> Any:
        return request(self.client, what, method, path, body=body, timeout=REQUEST_TIMEOUT)

    def create_job(self, job: Mapping[str, Any]) -> Any:
        return self._call(f"create podmigrationjob {_name(job)}", "POST", JOBS.path(), dict(job))

    def update_job(self, job: Mapping[str, Any]) -> Any:
        name = _name(job)
        return self._call(f"update podmigrationjob {name}", "PUT", JOBS.path(name), dict(job))

    def update_status(self, job: Mapping[str, Any]) -> Any:
        name = _name(job)
        return self._call(
            f"update podmigrationjob {name} status", "PUT", JOBS.path(name) + "/status", dict(job)
        )

    def delete_job(self, name: str) -> None:
        self._delete(JOBS, name)

    def create_reservation(self, r: Mapping[str, Any]) -> Any:
        return self._call(f"create reservation {_name(r)}", "POST", RESERVATIONS.path(), dict(r))

    def get_reservation(self, name: str) -> Any:
        return self._call(f"get reservation {name}", "GET", RESERVATIONS.path(name))

    def delete_reservation(self, name: str) -> bool:
        """``True`` when it was deleted, ``False`` when it was already gone."""
        return self._delete(RESERVATIONS, name)

    def get_pod(self, namespace: str, name: str) -> Any:
        return self._call(f"get pod {namespace}/{name}", "GET", groups.PODS.path(name, namespace))

    def _delete(self, res: groups.Resource, name: str) -> bool:
        try:
            self._call(f"delete {res.plural} {name}", "DELETE", res.path(name))
        except ApiError as err:
            if err.not_found:
                return False
            raise
        return True
