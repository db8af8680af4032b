"""Authentication and the opt-in authorization of the test API server.

Tokens are opaque strings the server issues: :meth:`Auth.token_for` for a ServiceAccount (the user
``system:serviceaccount:<ns>:<name>`` in groups ``system:serviceaccounts``,
``system:serviceaccounts:<ns>`` and ``system:authenticated``; the account must exist when the token is
used, as the legacy token authenticator checks, and a TokenRequest's token also expires),
:meth:`Auth.token_for_user` for any user, and an admin token in ``system:masters``. A request with an
unknown bearer token is a 401; one without a token is ``system:anonymous``. With authorization on, every
request is checked by :mod:`tests.apiserver.rbac` (403 with kube-apiserver's wording); off, every
request is allowed, as before.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from typing import TYPE_CHECKING

from tests.apiserver import status
from tests.apiserver.rbac import ANONYMOUS, AUTHENTICATED, SUPERUSER_GROUP, Authorizer, User, describe
from tests.apiserver.requestinfo import RequestInfo

if TYPE_CHECKING:
    from tests.apiserver.store import Store

ADMIN = "kubernetes-admin"


def unauthorized() -> status.APIError:
    return status.APIError(401, "Unauthorized")


class Auth:
    def __init__(self, store: Store, *, authorization: bool = False) -> None:
        self.store = store
        self.authorization = authorization
        self.authorizer = Authorizer(lambda resource, ns: store.list(resource, ns)[0])
        self._lock = threading.Lock()
        self._tokens: dict[str, User | tuple[str, str, float | None]] = {}
        self.admin_token = self.token_for_user(ADMIN, (SUPERUSER_GROUP,))

    def token_for_user(self, name: str, groups: tuple[str, ...] = ()) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = User(name, str(uuid.uuid4()), (*groups, AUTHENTICATED))
        return token

    def token_for(self, namespace: str, name: str, *, expires: float | None = None) -> str:
        """A bearer token of the ServiceAccount ``namespace/name``, valid until ``expires`` (epoch seconds,
        None: for ever)."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = (namespace, name, expires)
        return token

    def user_of(self, token: str) -> User | None:
        """Who ``token`` authenticates as, or None (unknown token, or its ServiceAccount is gone)."""
        with self._lock:
            found = self._tokens.get(token)
        if found is None or isinstance(found, User):
            return found
        ns, name, expires = found
        if expires is not None and time.time() >= expires:
            return None
        try:
            sa = self.store.get("serviceaccounts", name, ns)
        except status.APIError:
            return None
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{ns}", AUTHENTICATED)
        return User(f"system:serviceaccount:{ns}:{name}", sa["metadata"]["uid"], groups)

    def authenticate(self, header: str | None) -> User:
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        user = self.user_of(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise unauthorized()
        return user

    def authorize(self, user: User, info: RequestInfo) -> None:
        if not self.authorization:
            return
        allowed, _ = self.authorizer.allowed(user, info)
        if allowed:
            return
        why = f'User "{user.name}" cannot {describe(info)}'
        if not info.is_resource:
            raise status.APIError(403, f"forbidden: {why}")
        raise status.forbidden(info.resource, info.group, info.name, why)
