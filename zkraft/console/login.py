"""The console's login (`zkraft up --secure`): a user and password checked as the brokers check them, then a
signed session cookie. Where the console's own client logs in with SASL (a --secure cluster), the check is a
SCRAM login of that user to the brokers' gRPC ports (`broker_verifier`): with zookeeper.set.acl the credentials
in `/config/users` are the brokers' alone to read. Elsewhere the console reads `/config/users/<user>` and
checks the password against the stored SCRAM credentials itself (`zk_verifier`; RFC 5802 §3: the password's
salted key must give the stored key).

The cookie is `user|expiry|HMAC-SHA256` under a secret drawn when the console starts, so a restart logs
everyone out and nothing is stored server-side. The console then acts with the cluster's client.properties:
a login decides who may use the console, not what the cluster lets the console do.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

log = structlog.get_logger("zkraft.console")
COOKIE = "zkraft_console_session"
SESSION_S = 8 * 3600
OPEN_PATHS = ("/login", "/static/")


def scram_password_matches(config: dict[str, str], password: str) -> bool:
    """Whether `password` gives the stored key of any SCRAM credential among a user's configs."""
    from client.kafka.scram import credential_from_salted_password, salted_password, user_credentials

    for mechanism, credential in user_credentials(config).items():
        salted = salted_password(mechanism, password, credential.salt, credential.iterations)
        computed = credential_from_salted_password(mechanism, credential.salt, salted, credential.iterations)
        if hmac.compare_digest(computed.stored_key, credential.stored_key):
            return True
    return False


def zk_verifier(clients: Any) -> Callable[[str, str], bool]:
    """Checks a login against `/config/users/<user>` read through the console's ZooKeeper session."""

    def verify(user: str, password: str) -> bool:
        from client.kafka.scram import ScramCredentialError, sanitize_user
        from client.kafka.znodes import CONFIG_TYPE_USER, ZnodeDataError, config_entity_path, decode_config
        from client.zk.exceptions import NoNodeError

        path = config_entity_path(CONFIG_TYPE_USER, sanitize_user(user))
        with clients.use():
            try:
                data, _ = clients.zk.get(path)
            except NoNodeError:
                return False
        try:
            return scram_password_matches(decode_config(data, path), password)
        except (ZnodeDataError, ScramCredentialError):
            return False

    return verify


def broker_verifier(clients: Any) -> Callable[[str, str], bool]:
    """Checks a login by logging in as that user to the brokers' gRPC ports with the console's own SASL
    mechanism and TLS (a SaslAuthenticate exchange, as any SDK client's first call makes it)."""

    def verify(user: str, password: str) -> bool:
        from client import Admin
        from client.kafka.errors import SaslAuthenticationFailedError
        from runtime.client_config import SaslCredentials

        security = clients.targets.kafka_security
        sasl = SaslCredentials(security["sasl"].mechanism, user, password)
        try:
            with Admin(clients.targets.bootstrap_servers, **{**security, "sasl": sasl}) as admin:
                admin.list_topics()  # the first call logs in
        except SaslAuthenticationFailedError:
            return False
        return True

    return verify


def verifier_for(clients: Any) -> Callable[[str, str], bool]:
    """`broker_verifier` where the console's client logs in with SASL, else `zk_verifier`."""
    return broker_verifier(clients) if "sasl" in clients.targets.kafka_security else zk_verifier(clients)


class LoginGate:
    def __init__(self, verify: Callable[[str, str], bool], secret: bytes | None = None) -> None:
        self.verify = verify
        self.secret = secret if secret is not None else secrets.token_bytes(32)

    def _sign(self, payload: str) -> str:
        return hmac.new(self.secret, payload.encode(), hashlib.sha256).hexdigest()

    def cookie_for(self, user: str, now_s: float | None = None) -> str:
        payload = f"{urllib.parse.quote(user, safe='')}|{int((now_s or time.time()) + SESSION_S)}"
        return f"{payload}|{self._sign(payload)}"

    def user_of(self, cookie: str | None, now_s: float | None = None) -> str | None:
        if not cookie or cookie.count("|") != 2:
            return None
        payload, signature = cookie.rsplit("|", 1)
        if not hmac.compare_digest(self._sign(payload), signature):
            return None
        user, expiry = payload.split("|")
        if not expiry.isdigit() or int(expiry) < (now_s or time.time()):
            return None
        return urllib.parse.unquote(user)

    def check(self, request: Request) -> Response | None:
        """None when the request may go on (a page of a logged-in user, or the login page); else a redirect."""
        if request.url.path.startswith(OPEN_PATHS):
            return None
        user = self.user_of(request.cookies.get(COOKIE))
        if user is None:
            target = urllib.parse.urlencode({"next": request.url.path})
            return RedirectResponse(f"/login?{target}", status_code=303)
        request.scope["console_user"] = user
        return None

    def routes(self, state: Any, render: Callable[..., Response]) -> list[Route]:
        from starlette.concurrency import run_in_threadpool

        async def login_page(request: Request) -> Response:
            return render(state, request, "login.html", next=request.query_params.get("next", "/"))

        async def login(request: Request) -> Response:
            form = await request.form()
            user, password = str(form.get("user", "")), str(form.get("password", ""))
            target = str(form.get("next", "/"))
            target = target if target.startswith("/") and not target.startswith("//") else "/"
            if user and password and await run_in_threadpool(self.verify, user, password):
                log.info("console_login", user=user)
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(COOKIE, self.cookie_for(user), max_age=SESSION_S, httponly=True, samesite="strict")
                return response
            log.info("console_login_refused", user=user)
            return render(state, request, "login.html", status=401, next=target, error="Wrong user or password")

        async def logout(request: Request) -> Response:
            response = RedirectResponse("/login", status_code=303)
            response.delete_cookie(COOKIE)
            return response

        return [
            Route("/login", login_page),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
        ]
