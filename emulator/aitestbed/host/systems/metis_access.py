"""The Metis gateway from the host: where the cluster publishes it, what trusts it, a
user's token, and the rehearsal of a token's expiry (`aitestbed metis ...`).

The gateway (aitestbed.metis, node class metis_gateway) serves HTTPS on port 443 inside
the cluster at the docs' names; the cluster's gate publishes that port on 127.0.0.1
(provider/docker: the record's `services`), and its certificate names 127.0.0.1 and
localhost, so a program on the host verifies it with the cluster's Metis CA
(`common/metis/ca.crt` in the cluster's state).

A token for a user is what the docs' helper gets with a device code: the host asks the
gateway for one (POST /auth/device), completes it with the user's current passcode as
the emulated MobilePASS+ shows it (host/passcode, the same as `aitestbed passcode`), and
takes the session (POST /auth/token). Ageing and revoking run the gateway's own admin
command on its node (aitestbed.metis.admin).

The functions return data; the click commands (the registry's `commands`) print it.
"""

from __future__ import annotations

import json
import shlex
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from aitestbed.host import passcode
from aitestbed.host.errors import AitestbedError

if TYPE_CHECKING:
    from aitestbed.host.state import ClusterState

HTTPS = 443
GATEWAY_CLASS = "metis_gateway"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
ADMIN = ["/opt/aitestbed/venv/bin/python", "-m", "aitestbed.metis.admin"]
TIMEOUT = 30
API_PATH = "/resource_server/metis/api/v1"
ADDRESS = "127.0.0.1"


@dataclass(frozen=True)
class Endpoint:
    node: str  # the gateway node
    port: int  # on 127.0.0.1
    ca: Path  # the cluster's Metis CA certificate

    @property
    def url(self) -> str:
        """The service's root, as AITESTBED_METIS_URL wants it (the token helper)."""
        return f"https://{ADDRESS}:{self.port}"

    @property
    def base_url(self) -> str:
        """What the docs give OpenAI(base_url=...)."""
        return self.url + API_PATH

    def environment(self) -> dict[str, str]:
        """What a program on the host sets to reach and verify the gateway: the token
        helper's settings, the `openai` package's, httpx's and requests' CA bundles."""
        return {"AITESTBED_METIS_URL": self.url, "AITESTBED_METIS_CA": str(self.ca),
                "OPENAI_BASE_URL": self.base_url, "SSL_CERT_FILE": str(self.ca),
                "REQUESTS_CA_BUNDLE": str(self.ca)}


def endpoint(state: ClusterState) -> Endpoint:
    """The published gateway of the cluster, or one line saying why there is none."""
    if not state.exists():
        raise AitestbedError(f"no cluster {state.name!r}: run `aitestbed up` first")
    record = state.load()
    published = sorted((key, port) for key, port in record.services.items()
                       if key.endswith(f":{HTTPS}"))
    gateways = [(key.rpartition(":")[0], port) for key, port in published
                if _class_of(state, key.rpartition(":")[0]) == GATEWAY_CLASS]
    if not gateways:
        if record.provider != "docker":
            raise AitestbedError(
                f"cluster {state.name!r} runs on the {record.provider} provider, which does "
                "not publish the Metis gateway for the host: reach it from a login node")
        raise AitestbedError(
            f"cluster {state.name!r} has no published Metis gateway: Metis is in the "
            "alcf-2026 profiles (`aitestbed up --profile alcf-2026-mini --systems "
            "graphcore,metis`); a cluster made before the gateway was published gets its "
            "port at its next `up`")
    node, port = gateways[0]
    ca = state.common_dir / "metis" / "ca.crt"
    if not ca.is_file():
        raise AitestbedError(f"the cluster's Metis CA ({ca}) is missing: run `aitestbed up`")
    return Endpoint(node, port, ca)


def _class_of(state: ClusterState, node: str) -> str | None:
    """A node's class from its config in the state (node.json), None if unknown."""
    from aitestbed.node.config import NodeConfig  # noqa: PLC0415 - the node's own format
    try:
        return NodeConfig.from_json((state.node_dir(node) / "node.json").read_text()).node_class
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- a user's token (the device code, completed with the user's passcode) --------------
def _post(end: Endpoint, path: str, body: dict) -> tuple[int, dict]:
    """POST JSON over TLS verified with the cluster's CA: (status, JSON answer)."""
    request = urllib.request.Request(end.url + path, data=json.dumps(body).encode(),
                                     method="POST",
                                     headers={"Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=str(end.ca))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as err:
        try:
            return err.code, json.loads(err.read() or b"{}")
        except ValueError:
            return err.code, {}
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise AitestbedError(f"the Metis gateway at {end.url} did not answer ({reason}): is "
                             "the cluster up (`aitestbed status`)?") from None


def _said(answer: dict) -> str:
    err = answer.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(answer.get("error_description") or err or answer)


def token(state: ClusterState, user: str, on_wait=None) -> dict:
    """A new session of `user` (access_token, refresh_token, expires_in, ...), by the
    device code completed with the user's passcode; an unknown or offboarded user, or a
    gateway that refuses, is one clear error. The gateway takes each passcode once: when
    this step's and the next step's were both used (a second token within half a minute),
    it waits for a fresh step (`on_wait(seconds)` says so) and asks again."""
    end = endpoint(state)
    enrolment = passcode.token_of(state, user)
    for attempt in range(2):
        status, offer = _post(end, "/auth/device", {"client_id": "aitestbed"})
        if status != 200 or "device_code" not in offer:
            raise AitestbedError(f"the gateway gave no device code ({status}): "
                                 f"{_said(offer)}")
        if _complete(end, offer["user_code"], user, enrolment):
            break
        if attempt:
            raise AitestbedError(f"the gateway refused {user}'s passcodes as used ones")
        wait = passcode.STEP * 2 - time.time() % passcode.STEP  # past the step tried ahead
        if on_wait:
            on_wait(wait)
        time.sleep(wait)
    status, session = _post(end, "/auth/token", {"grant_type": DEVICE_GRANT,
                                                 "device_code": offer["device_code"]})
    if status != 200 or "access_token" not in session:
        raise AitestbedError(f"the gateway gave no tokens ({status}): {_said(session)}")
    return session


def _complete(end: Endpoint, user_code: str, user: str, enrolment: dict) -> bool:
    """The device code completed with this step's passcode, else the next step's (the
    gateway's window takes it); False when both were used already."""
    now = time.time()
    for ahead in (0, 1):
        typed = passcode.typed(enrolment, now + ahead * passcode.STEP)
        status, answer = _post(end, "/auth/device/verify", {
            "user_code": user_code, "username": user, "passcode": typed})
        if status == 200:
            return True
        err = answer.get("error")
        code = err.get("code") if isinstance(err, dict) else err
        if code != "passcode_replayed":
            raise AitestbedError(f"the gateway refused {user}'s passcode ({status}): "
                                 f"{_said(answer)}")
    return False


@dataclass(frozen=True)
class Access:
    """What a program on the host needs to call the gateway as a user."""

    base_url: str
    ca: Path
    token: str
    environment: dict  # OPENAI_BASE_URL, OPENAI_API_KEY, SSL_CERT_FILE, ... for a subprocess


def access(state: ClusterState, user: str | None = None) -> Access:
    """The published gateway and a new access token of USER (default: the practice user),
    as `aitestbed metis env --token` gives them."""
    end = endpoint(state)
    session = token(state, user or state.load().user)
    return Access(end.base_url, end.ca, session["access_token"],
                  {**end.environment(), "OPENAI_API_KEY": session["access_token"]})


# --- rehearsing expiry (the gateway's own admin command, on its node) -------------------
def admin(state: ClusterState, provider, *args: str) -> object:
    """Run aitestbed.metis.admin on the gateway node; its JSON answer."""
    end = endpoint(state)
    result = provider.exec(state.name, end.node, [*ADMIN, *args], separate=True)
    out = result.stdout.decode(errors="replace")
    if result.exit_code:
        said = (result.stderr.decode(errors="replace") or out).strip().splitlines()
        raise AitestbedError(said[-1] if said else f"metis admin exited {result.exit_code}")
    try:
        return json.loads(out)
    except ValueError:
        raise AitestbedError(f"metis admin answered no JSON: {out[:200]!r}") from None


# --- the commands ------------------------------------------------------------------------
def _state(ctx: click.Context) -> ClusterState:
    """The cluster's state, as the CLI gives it (ctx.obj: the registry's commands do not
    import the host modules that import the registry)."""
    return ctx.obj["state"]


def _user(state: ClusterState, user: str | None) -> str:
    return user or state.load().user


def _provider(ctx: click.Context, state: ClusterState):
    """The cluster's provider, as the CLI gives it (ctx.obj)."""
    return ctx.obj["provider_of"](state)


def _waiting(seconds: float) -> None:
    click.echo(f"aitestbed: this passcode and the next were used already: waiting "
               f"{seconds:.0f} s for a fresh one", err=True)


@click.group("metis")
def metis_cmd() -> None:
    """The Metis inference gateway from this machine (the alcf-2026 profiles).

    \b
    eval "$(aitestbed metis env --token)"
    curl "$OPENAI_BASE_URL/models" -H "Authorization: Bearer $OPENAI_API_KEY"
    """


@metis_cmd.command("url")
@click.option("--root", is_flag=True, help="The service's root, not the OpenAI base URL.")
@click.pass_context
def metis_url(ctx: click.Context, root: bool) -> None:
    """The base URL of the gateway on 127.0.0.1 (OpenAI(base_url=...))."""
    end = endpoint(_state(ctx))
    click.echo(end.url if root else end.base_url)


@metis_cmd.command("ca")
@click.pass_context
def metis_ca(ctx: click.Context) -> None:
    """The path of the cluster's Metis CA certificate, which the gateway's TLS chains to."""
    click.echo(endpoint(_state(ctx)).ca)


@metis_cmd.command("env")
@click.option("--token", "with_token", is_flag=True,
              help="Also a new access token of USER as OPENAI_API_KEY.")
@click.option("--user", "-u", default=None, help="Whose token (default: the practice user).")
@click.pass_context
def metis_env(ctx: click.Context, with_token: bool, user: str | None) -> None:
    """Shell lines that point the token helper, `openai`, httpx and requests at the gateway
    and its CA: eval "$(aitestbed metis env)"."""
    state = _state(ctx)
    values = endpoint(state).environment()
    if with_token:
        values["OPENAI_API_KEY"] = token(state, _user(state, user), _waiting)["access_token"]
    for key, value in values.items():
        click.echo(f"export {key}={shlex.quote(value)}")


@metis_cmd.command("token")
@click.option("--user", "-u", default=None, help="Whose token (default: the practice user).")
@click.option("--json", "as_json", is_flag=True,
              help="The whole session (access and refresh token, lifetimes) as JSON.")
@click.pass_context
def metis_token(ctx: click.Context, user: str | None, as_json: bool) -> None:
    """A new access token of USER (48 hours), as the docs' helper gets one: a device code
    completed with the user's current passcode."""
    state = _state(ctx)
    session = token(state, _user(state, user), _waiting)
    click.echo(json.dumps(session, indent=2) if as_json else session["access_token"])


@metis_cmd.command("age")
@click.option("--user", "-u", default=None, help="Whose tokens (default: the practice user).")
@click.option("--seconds", type=click.IntRange(min=1), default=48 * 3600, show_default=True,
              help="How much earlier they end (48 h: the access tokens are expired now).")
@click.option("--session", is_flag=True,
              help="The session too (7 days = 604800: re-authentication is needed).")
@click.pass_context
def metis_age(ctx: click.Context, user: str | None, seconds: int, session: bool) -> None:
    """Age USER's tokens on the gateway, to rehearse the 48-hour expiry (the next call gets
    401 and `get_access_token` refreshes) or, with --session, the 7-day re-authentication."""
    state = _state(ctx)
    answer = admin(state, _provider(ctx, state), "age", "--user", _user(state, user),
                   "--seconds", str(seconds), *(["--session"] if session else []))
    click.echo(json.dumps(answer, indent=2))


@metis_cmd.command("revoke")
@click.option("--user", "-u", default=None, help="Whose tokens (default: the practice user).")
@click.pass_context
def metis_revoke(ctx: click.Context, user: str | None) -> None:
    """Revoke every token of USER on the gateway (access and refresh)."""
    state = _state(ctx)
    click.echo(json.dumps(admin(state, _provider(ctx, state), "revoke", "--user",
                                _user(state, user)), indent=2))


@metis_cmd.command("tokens")
@click.option("--user", "-u", default=None, help="Whose tokens (default: the practice user).")
@click.pass_context
def metis_tokens(ctx: click.Context, user: str | None) -> None:
    """USER's tokens on the gateway: kind, expiry, session end, revoked (never a token)."""
    state = _state(ctx)
    click.echo(json.dumps(admin(state, _provider(ctx, state), "list", "--user",
                                _user(state, user)), indent=2))
