"""The Engine API socket a sandbox gets: each call judged (api.py), forwarded to the host's engine, or refused.

The run serves it from threads of its own while the command runs: a unix
socket in stockade's runtime folder, bound at /run/docker.sock inside (the
sandbox's /run is its own). One request per connection: the gate reads the
request, judges it, sends it to the engine with `Connection: close`, and
relays the answer; a call that attaches to a container (attach, exec start)
is then a stream both ways. The gate keeps what this run made (containers,
execs, volumes): a call on anything else is answered as if it did not exist,
the list of containers shows only these, and when the run ends they are
removed (unless `keep`). Each container and volume it creates carries the
label LABEL with the run's session, so a run killed before its end leaves
nothing another run cannot find and remove (`sweep`).

A refused call is a 403 with `{"message": ...}`, which the Docker CLI prints as
"Error response from daemon: ...", and a line in the run's summary.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

from stockade.containers import api
from stockade.containers.wire import MAX_BODY, MAX_RESPONSE, Head, Reader, WireError, encode_head, json_response, read_body, request_line, status_of

LABEL = "io.stockade.session"
KEPT_LABEL = "io.stockade.kept"
INSIDE = "/run/docker.sock"  # where the sandbox finds it; /var/run is a link to /run
# Request headers the engine is given, by name (the rest are dropped: only these mean anything to it)
FORWARDED_HEADERS = frozenset({"content-type", "content-length", "transfer-encoding", "accept", "user-agent", "x-registry-auth", "x-registry-config"})
SANDBOX_WAIT = 10.0  # seconds a create waits to learn the sandbox's namespace
ENGINE_TIMEOUT = 30.0  # seconds for an answer the gate reads whole (a create, a list)
REQUEST_TIMEOUT = 30.0  # seconds for a call's request to arrive whole
MAX_CALLS = 64  # calls served at once
MAX_EXECS = 256  # execs one run may make
LISTEN_BACKLOG = 512  # connections waiting for one of them (a unix socket past it refuses at once)
STREAM_IDLE = None  # streams (logs -f, attach, wait) last as long as the container


class Gate:
    """One run's Engine API: `start` before the sandbox, `close` after it."""

    def __init__(self, engine: str, listen: str, session: str, images: tuple[str, ...], keep: bool, kind: str = "docker") -> None:
        self.engine = engine  # the host engine's socket
        self.kind = kind  # "podman" joins a container to the sandbox's network namespace; "docker" cannot (none)
        self._sandbox = threading.Event()  # set once the sandbox's first process is known (attach)
        self.network = "none"
        self._label = KEPT_LABEL if keep else LABEL  # what a run keeps, the next run's sweep never takes
        self.listen = listen
        self.session = session
        self.images = images
        self.keep = keep
        self.containers: dict[str, str] = {}  # id: name ("" if none)
        self.ports: dict[str, list[str]] = {}  # id: the ports its create exposed or published ("8080/tcp")
        self.execs: set[str] = set()
        self.started: set[str] = set()  # containers started once (never again: _start_once)
        self.volumes: set[str] = set()
        self.refused: list[str] = []  # one line per refused call, for the summary
        self.audit: Callable[[str, str, str, str], None] | None = None  # (decision, call, rule, image): each judged call
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._closing = False
        self._slots = threading.BoundedSemaphore(MAX_CALLS)
        self._making = 0  # creates sent to the engine and not answered yet
        self._asked_to_make = False  # whether any was: only then is the engine asked, at the end, for what it holds of this run
        self._made = threading.Condition(self._lock)

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> None:
        os.makedirs(os.path.dirname(self.listen), mode=0o700, exist_ok=True)
        try:
            os.unlink(self.listen)
        except FileNotFoundError:
            pass
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        folder = os.open(os.path.dirname(self.listen), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        old = os.umask(0o077)
        try:  # through the folder's descriptor: a runtime folder deep enough would pass AF_UNIX's 108 bytes
            server.bind(f"/proc/self/fd/{folder}/{os.path.basename(self.listen)}")
        except OSError:
            server.close()
            raise
        finally:
            os.umask(old)
            os.close(folder)
        server.listen(LISTEN_BACKLOG)
        self._server = server
        thread = threading.Thread(target=self._accept, name="stockade-containers", daemon=True)
        thread.start()

    def attach(self, init_pid: int) -> None:
        """The sandbox's first process: podman's containers join its network namespace (ns:PATH)."""
        if self.kind == "podman":
            self.network = f"ns:/proc/{init_pid}/ns/net"
        self._sandbox.set()

    def close(self) -> list[str]:
        """Stop serving; remove what the run made unless `keep`. Lines for the summary."""
        self._closing = True
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
        try:
            os.unlink(self.listen)
        except OSError:
            pass
        deadline = time.monotonic() + ENGINE_TIMEOUT  # the creates still in flight end first (streams are ended by the removal)
        with self._made:
            while self._making and time.monotonic() < deadline:
                self._made.wait(deadline - time.monotonic())
        lines = list(dict.fromkeys(self.refused))[:5]
        if len(self.refused) > 5:
            lines.append(f"... and {len(self.refused) - 5} more container calls refused")
        if self.keep:
            return lines
        if self._asked_to_make:
            self._labelled_by_this_run()
        if not (self.containers or self.volumes):
            return lines
        left = self.remove_all()
        if left:
            lines.append(f"could not remove {len(left)} of this run's containers or volumes ({', '.join(left[:3])}); `docker rm -f` them")
        return lines

    def _labelled_by_this_run(self) -> None:
        """Whatever the engine holds with this run's label, made or not through a call the gate saw end."""
        filters = quote(json.dumps({"label": [f"{LABEL}={self.session}"]}))
        status, found = self._call("GET", f"/containers/json?all=true&filters={filters}")
        for item in found if status == 200 and isinstance(found, list) else ():
            if isinstance(item, dict) and isinstance(item.get("Id"), str) and (item.get("Labels") or {}).get(LABEL) == self.session:
                self.containers.setdefault(item["Id"], "")

    def remove_all(self) -> list[str]:
        """Remove this run's containers, then its volumes; what could not be removed."""
        left = []
        for cid in list(self.containers):
            self._call("POST", f"/containers/{cid}/kill?signal=KILL")  # a forced remove would wait out the container's own stop timeout
            status, _data = self._call("DELETE", f"/containers/{cid}?force=true&v=true")
            if status not in (204, 404):
                left.append(cid[:12])
        for name in list(self.volumes):
            if not self._volume_is_ours(name):
                continue
            status, _data = self._call("DELETE", f"/volumes/{quote(name, safe='')}?force=true")
            if status not in (204, 404):
                left.append(name)
        return left

    def _accept(self) -> None:
        assert self._server is not None
        while not self._closing:
            self._slots.acquire()  # at most MAX_CALLS at once: more wait in the listen queue
            try:
                client, _ = self._server.accept()
            except OSError:
                self._slots.release()
                if self._closing:
                    return
                time.sleep(0.1)  # out of descriptors for a moment: the gate stays up
                continue
            threading.Thread(target=self._serve_one, args=(client,), name="stockade-containers-call", daemon=True).start()

    def _serve_one(self, client: socket.socket) -> None:
        try:
            self._serve(client)
        finally:
            self._slots.release()

    # -- one call -----------------------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        call = ""
        try:
            reader = Reader(client, time.monotonic() + REQUEST_TIMEOUT)  # a head and a checked body arrive whole within it
            raw = reader.head()
            if raw is None:
                return
            head = Head(raw)
            method, target = request_line(head)
            _single_keys(target)
            call = f"{method} {api.shown_path(target)}"
            found = api.route(method, target)
            if found is None:
                self._refuse(client, api.refusal_reason(method, target), call)
                return
            route, parts = found
            self._handle(client, reader, head, method, target, route, parts)
        except api.Refused as refusal:
            self._refuse(client, str(refusal), call)
        except WireError as error:
            _send(client, json_response(400, "Bad Request", {"message": f"stockade: {error}"}))
        except OSError:
            pass
        except Exception as error:  # noqa: BLE001 - a call the gate cannot judge is refused, never a traceback on the run's terminal
            self._refuse(client, f"the call could not be judged ({type(error).__name__}: {error})", call)
        finally:
            client.close()

    def _refuse(self, client: socket.socket, why: str, call: str = "") -> None:
        with self._lock:
            self.refused.append(why)
        self._record("deny", call, why)
        _send(client, json_response(403, "Forbidden", {"message": f"stockade: {why}"}))

    def _record(self, decision: str, call: str, rule: str, image: str = "") -> None:
        if self.audit is not None and call:
            self.audit(decision, call, rule, image)

    def _missing(self, client: socket.socket, what: str, name: str) -> None:
        _send(client, json_response(404, "Not Found", {"message": f"No such {what}: {name} (stockade shows only this run's)"}))

    def _handle(self, client: socket.socket, reader: Reader, head: Head, method: str, target: str, route: api.Route, parts: dict[str, str]) -> None:
        kind = route.kind
        path, _, query = target.partition("?")
        if kind in ("container", "inspect", "hijack", "exec-create", "start", "copy-in"):
            cid = self._own_container(parts["id"])
            if cid is None:
                self._missing(client, "container", parts["id"])
                return
            path = path.replace(f"/containers/{parts['id']}", f"/containers/{cid}", 1)
        if kind in ("exec", "exec-hijack") and parts["id"] not in self.execs:
            self._missing(client, "exec instance", parts["id"])
            return
        if kind == "volume" and (parts["id"] not in self.volumes or not self._volume_is_ours(parts["id"])):
            self._missing(client, "volume", parts["id"])
            return
        target = path + ("?" + query if query else "")
        call = f"{method} {api.shown_path(target)}"
        if kind == "start":
            self._start_once(path.split("/")[-2])
        if kind == "copy-in" and not self._running(path.split("/")[-2]):
            # into a stopped container podman copies on the host side, and its next start would follow what was copied
            raise api.Refused("a copy in goes only into a running container inside stockade")
        if kind == "image" and not self._image_listed(target):
            self._missing(client, "image", parts["image"])
            return
        if path.endswith("/top") and "ps_args" in dict(parse_qsl(query)):
            raise api.Refused("top's ps_args are not forwarded (docker runs ps with them on the host)")
        if kind == "pull":
            target = path + "?" + self._checked_pull(query)  # the values checked, and nothing else
            self._record("allow", call, "pull of an image [containers] images allows", dict(parse_qsl(query)).get("fromImage", ""))
        if kind in ("create", "exec-create", "volume-create"):
            body = self._json_body(reader, head)
            named = str(body.get("Image") or "")  # as the client named it (the engine is given the id it resolved to)
            if kind == "create":
                asked = _ports_of(body)
                body, made = self._checked_create(body)
            elif kind == "exec-create":
                api.check_exec(body)
                with self._lock:
                    if len(self.execs) >= MAX_EXECS:
                        raise api.Refused(f"a run makes at most {MAX_EXECS} execs (the engine leaves a process on the host for each)")
            else:
                api.check_volume(body)
                name = body.get("Name")
                if name and self._call("GET", f"/volumes/{quote(str(name), safe='')}")[0] != 404:
                    raise api.Refused(f"volume {name} exists and is not this run's (a create of an existing volume answers with it)")
                body["Labels"] = {**(body.get("Labels") or {}), self._label: self.session}
            self._record("allow", call, "judged and forwarded", named if kind == "create" else "")
            with self._lock:
                if self._closing:
                    raise api.Refused("the run is ending")
                self._making += 1
                self._asked_to_make = True
            try:
                status, answer = self._call(method, target, body)
                if status == 201 and isinstance(answer, dict):
                    self._remember(kind, answer, query, made if kind == "create" else (), asked if kind == "create" else [])
            finally:
                with self._lock:
                    self._making -= 1
                    self._made.notify_all()
            _send(client, json_response(status, "", answer) if status >= 0 else _unreachable(self.engine))
            return
        if kind == "list":
            status, answer = self._call(method, target)
            if isinstance(answer, list):
                with self._lock:
                    answer = [self._listed(item) for item in answer if isinstance(item, dict) and item.get("Id") in self.containers]
            _send(client, json_response(status, "", answer) if status >= 0 else _unreachable(self.engine))
            return
        if kind == "images":  # the host's other images are not the sandbox's to list
            status, answer = self._call(method, target)
            if isinstance(answer, list):
                answer = [item for item in answer if isinstance(item, dict) and self._listable(item)]
            _send(client, json_response(status, "", answer) if status >= 0 else _unreachable(self.engine))
            return
        if kind == "inspect" and self.network != "none":
            status, answer = self._call(method, target)
            if status == 200 and isinstance(answer, dict):
                answer = self._inspected(answer)
            _send(client, json_response(status, "", answer) if status >= 0 else _unreachable(self.engine))
            return
        payload: bytes | None = None
        if kind == "exec-hijack":
            payload = json.dumps(api.checked_exec_start(self._json_body(reader, head))).encode()
        elif kind != "copy-in" and (head.body_length() != 0 or head.get("Transfer-Encoding")):
            # API 1.23 and older read a start's body as the container's whole HostConfig: no call but a copy in has one
            raise api.Refused(f"{call} takes no body")
        if method not in ("GET", "HEAD"):  # what changes something (start, kill, exec, copy in, remove); reads are not recorded
            self._record("allow", call, "a call on what this run made")
        reader.deadline = None  # a copy in streams as long as it takes, a call's answer as long as it runs
        client.settimeout(REQUEST_TIMEOUT)
        self._relay(client, reader, head, method, target, hijack=kind in ("hijack", "exec-hijack"), body=payload)

    def _inspected(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A container in the sandbox's namespace listens on the sandbox's own loopback: each port it
        exposes is shown as published there at the same number (what Testcontainers and docker-py read)."""
        config: dict[str, Any] = answer["Config"] if isinstance(answer.get("Config"), dict) else {}
        exposed: dict[str, Any] = config["ExposedPorts"] if isinstance(config.get("ExposedPorts"), dict) else {}
        settings: dict[str, Any] = answer["NetworkSettings"] if isinstance(answer.get("NetworkSettings"), dict) else {}
        with self._lock:
            asked = self.ports.get(str(answer.get("Id")), [])
        ports = {port: [{"HostIp": "127.0.0.1", "HostPort": port.split("/", 1)[0]}] for port in dict.fromkeys([*exposed, *asked])}
        return {**answer, "NetworkSettings": {**settings, "Ports": ports}}

    def _listed(self, item: dict[str, Any]) -> dict[str, Any]:
        if self.network == "none" or not isinstance(item.get("Ports"), list):
            return item
        ports = [{**port, "IP": "127.0.0.1", "PublicPort": port.get("PrivatePort")} for port in item["Ports"] if isinstance(port, dict)]
        return {**item, "Ports": ports}

    def _start_once(self, cid: str) -> None:
        """Each start makes the container's working folder on the host side anew, following links its root
        holds by then: a container starts once (a restart policy is refused at create)."""
        with self._lock:
            if cid in self.started:
                raise api.Refused("a container starts once inside stockade: create another")
            self.started.add(cid)

    def _running(self, cid: str) -> bool:
        status, answer = self._call("GET", f"/containers/{cid}/json")
        state = answer.get("State") if status == 200 and isinstance(answer, dict) else None
        return isinstance(state, dict) and state.get("Running") is True

    def _image_listed(self, target: str) -> bool:
        status, answer = self._call("GET", target.split("?", 1)[0])
        return status == 200 and isinstance(answer, dict) and self._listable(answer)

    def _listable(self, image: dict[str, Any]) -> bool:
        tags = image.get("RepoTags")
        return isinstance(tags, list) and any(api.image_allowed(str(tag), self.images) for tag in tags)

    def _volume_is_ours(self, name: str) -> bool:
        """By its exact name and this run's label: the engine's remove takes a prefix of another's name
        when none has this one exactly (a volume this run removed already)."""
        status, answer = self._call("GET", f"/volumes/{quote(name, safe='')}")
        if status == 200 and isinstance(answer, dict) and answer.get("Name") == name and self._labelled(answer):
            return True
        with self._lock:
            self.volumes.discard(name)
        return False

    def _own_container(self, name: str) -> str | None:
        with self._lock:
            if name in self.containers:
                return name
            for cid, given in self.containers.items():
                if given and given.lstrip("/") == name.lstrip("/"):
                    return cid
            starts = [cid for cid in self.containers if cid.startswith(name)] if len(name) >= 4 else []
            return starts[0] if len(starts) == 1 else None

    def _checked_pull(self, query: str) -> str:
        """The pull's query rebuilt from the values checked: fromImage, tag and platform, nothing else."""
        fields = dict(parse_qsl(query, keep_blank_values=True))
        if set(fields) - {"fromImage", "tag", "platform"}:
            raise api.Refused("image imports are not forwarded, and a pull takes fromImage, tag and platform only")
        image, tag, platform = fields.get("fromImage", ""), fields.get("tag", ""), fields.get("platform", "")
        if not image:
            raise api.Refused("a pull names no image")
        reference = image if not tag or "@" in image else (f"{image}@{tag}" if tag.startswith("sha256:") else f"{image}:{tag}")
        full = api.checked_image(reference)
        if not api.image_allowed(full, self.images):
            raise api.Refused(f"image {full} is not one [containers] images allows")
        return urlencode({"fromImage": full, **({"platform": platform} if platform else {})})

    def _checked_create(self, body: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        image = self._allowed_image(str(body.get("Image") or ""))
        if self.kind == "podman" and not (body.get("Entrypoint") and body.get("Cmd")):  # the image's own command counts too
            status, found = self._call("GET", f"/images/{quote(image, safe='')}/json")
            config = found.get("Config") if status == 200 and isinstance(found, dict) else None
            if isinstance(config, dict) and (api.systemd_mode(config.get("Entrypoint")) or api.systemd_mode(config.get("Cmd"))):
                raise api.Refused(f"image {image}'s own command runs in podman's systemd mode (the host's cgroup tree inside): refused")
        made: list[str] = []

        def volume_known(name: str) -> bool | None:
            with self._lock:
                if name in self.volumes:
                    return True
            status, _data = self._call("GET", f"/volumes/{quote(name, safe='')}")
            if status == 404:
                made.append(name)
                return None
            return False

        if self.kind == "podman":
            self._sandbox.wait(SANDBOX_WAIT)  # a call comes from inside, so the sandbox is there: its pid is known at once
        # a kept container would join the namespace of a pid long gone (and perhaps used again) when started later
        forwarded = api.check_create(body, volume_known, "none" if self.keep else self.network)
        forwarded["Image"] = image
        forwarded["Labels"] = {**(forwarded.get("Labels") or {}), self._label: self.session}
        for name in made:  # made here, labelled, before the engine would make it unlabelled for the container
            status, answer = self._call("POST", "/volumes/create", {"Name": name, "Labels": {self._label: self.session}})
            if status != 201 or not self._labelled(answer):
                raise api.Refused(f"volume {name} could not be made for this run")
            with self._lock:
                self.volumes.add(name)
        return forwarded, ()

    def _allowed_image(self, image: str) -> str:
        """The image as the engine is given it: the whole name checked, or the full id of an image whose
        names are allowed (a short name or an id prefix resolves against local images first)."""
        if api.IMAGE_ID.match(image):
            status, data = self._call("GET", f"/images/{quote(image, safe='')}/json")
            tags = data.get("RepoTags") if status == 200 and isinstance(data, dict) else None
            if tags and any(api.image_allowed(str(tag), self.images) for tag in tags) and isinstance(data.get("Id"), str):
                return str(data["Id"])
        else:
            full = api.checked_image(image) if image else ""
            if full and api.image_allowed(full, self.images):
                # the image the engine would take for that name (by a digest it looks in every repository):
                # its own names must be allowed, and the engine is given its id
                status, data = self._call("GET", f"/images/{quote(full, safe='')}/json")
                if status != 200:
                    return full  # not here: the engine says so, and a client pulls it through the gate
                tags = data.get("RepoTags") if isinstance(data, dict) else None
                if tags and any(api.image_allowed(str(tag), self.images) for tag in tags) and isinstance(data.get("Id"), str):
                    return str(data["Id"])
        raise api.Refused(f"image {image or '(none)'} is not one [containers] images allows")

    def _labelled(self, answer: Any) -> bool:
        labels = answer.get("Labels") if isinstance(answer, dict) else None
        return isinstance(labels, dict) and labels.get(self._label) == self.session

    def _remember(self, kind: str, answer: dict[str, Any], query: str, made: tuple[str, ...], ports: list[str]) -> None:
        with self._lock:
            if kind == "create" and isinstance(answer.get("Id"), str):
                self.containers[answer["Id"]] = (parse_qs(query).get("name") or [""])[0]
                self.ports[answer["Id"]] = ports
                self.volumes.update(made)
            elif kind == "exec-create" and isinstance(answer.get("Id"), str):
                self.execs.add(answer["Id"])
            elif kind == "volume-create" and isinstance(answer.get("Name"), str) and self._labelled(answer):
                self.volumes.add(answer["Name"])  # another run's, made meanwhile with the same name, is not taken

    def _json_body(self, reader: Reader, head: Head) -> dict[str, Any]:
        data = read_body(reader, head, MAX_BODY)
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            raise api.Refused("the body is not JSON") from None
        if not isinstance(body, dict):
            raise api.Refused("the body is not a JSON object")
        return body

    # -- to the engine ------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        engine.settimeout(ENGINE_TIMEOUT)
        try:
            engine.connect(self.engine)
        except OSError:
            engine.close()
            raise
        return engine

    def _call(self, method: str, target: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """One call whose answer the gate reads whole: (status, JSON or None); (-1, None) if the engine is not there."""
        data = json.dumps(body).encode() if body is not None else b""
        headers = [("Host", "docker"), ("Connection", "close"), ("Content-Length", str(len(data)))]
        if body is not None:
            headers.append(("Content-Type", "application/json"))
        try:
            engine = self._connect()
        except OSError:
            return -1, None
        try:
            engine.sendall(encode_head(f"{method} {target} HTTP/1.1", headers) + data)
            reader = Reader(engine)
            raw = reader.head()
            if raw is None:
                return -1, None
            head = Head(raw)
            status = status_of(head)
            payload = read_body(reader, head, MAX_RESPONSE, until_end=True) if method != "HEAD" else b""
        except (OSError, WireError):
            return -1, None
        finally:
            engine.close()
        try:
            return status, json.loads(payload) if payload.strip() else None
        except ValueError:
            return status, {"message": payload[:500].decode("utf-8", "replace")}

    def _relay(self, client: socket.socket, reader: Reader, head: Head, method: str, target: str, hijack: bool, body: bytes | None = None) -> None:
        """Forward the request as it came (its body streamed, framed as it was) and relay the answer;
        an attach or exec start becomes a stream both ways once the engine switches."""
        try:
            engine = self._connect()
        except OSError:
            _send(client, _unreachable(self.engine))
            return
        engine.settimeout(STREAM_IDLE)
        try:
            known = FORWARDED_HEADERS if body is None else FORWARDED_HEADERS - {"content-length", "transfer-encoding"}
            headers = [("Host", "docker"), *((name, value) for name, value in head.headers if name.lower() in known)]
            headers += [("Content-Length", str(len(body)))] if body is not None else []
            headers += [("Connection", "Upgrade"), ("Upgrade", "tcp")] if hijack else [("Connection", "close")]
            engine.sendall(encode_head(f"{method} {target} HTTP/1.1", headers))
            if body is not None:
                engine.sendall(body)
            else:
                _forward_body(reader, head, engine)
            if not hijack:
                _pipe(engine, client)  # nothing the client sends after its request reaches the engine
                return
            answer = Reader(engine)
            raw = answer.head()
            if raw is None:
                return
            response = Head(raw)
            client.sendall(raw)
            streams = status_of(response) == 101 or (status_of(response) == 200 and "vnd.docker" in (response.get("Content-Type") or ""))
            if not streams:  # refused, or an error: its answer, and the client's further bytes never reach the engine
                client.sendall(answer.take())
                _pipe(engine, client)
                return
            client.sendall(answer.take())
            client.settimeout(None)  # a stream lasts as long as the container's
            leftover = reader.take()  # what the client sent after its request: the stream's first bytes
            if leftover:
                engine.sendall(leftover)
            _pipe_both(client, engine)
        finally:
            engine.close()


def _single_keys(target: str) -> None:
    """The engine reads query keys regardless of case, the last one winning: each key once, in one spelling."""
    keys = [key.casefold() for key, _value in parse_qsl(target.partition("?")[2], keep_blank_values=True)]
    if len(set(keys)) != len(keys):
        raise api.Refused("a query key given twice (or in two spellings): refused")


def _ports_of(body: dict[str, Any]) -> list[str]:
    """The ports a create exposes or publishes, as "8080/tcp"."""
    host = body.get("HostConfig") if isinstance(body.get("HostConfig"), dict) else {}
    found: list[str] = []
    for table in (body.get("ExposedPorts"), (host or {}).get("PortBindings")):
        if isinstance(table, dict):
            found += [port if "/" in port else f"{port}/tcp" for port in table if isinstance(port, str) and port.split("/", 1)[0].isdigit()]
    return list(dict.fromkeys(found))


def _forward_body(reader: Reader, head: Head, engine: socket.socket) -> None:
    length = head.body_length()
    if length is None:
        from stockade.containers.wire import chunks

        for piece in chunks(reader):
            engine.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        engine.sendall(b"0\r\n\r\n")
        return
    left = length
    while left > 0:
        piece = reader.exactly(min(left, 1 << 16))
        engine.sendall(piece)
        left -= len(piece)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    while True:
        data = source.recv(1 << 16)
        if not data:
            return
        sink.sendall(data)


def _pipe_both(client: socket.socket, engine: socket.socket) -> None:
    def upstream() -> None:
        try:
            _pipe(client, engine)
            engine.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    thread = threading.Thread(target=upstream, daemon=True)
    thread.start()
    try:
        _pipe(engine, client)
        client.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _send(client: socket.socket, data: bytes) -> None:
    try:
        client.sendall(data)
    except OSError:
        pass


def _unreachable(engine: str) -> bytes:
    return json_response(
        502, "Bad Gateway", {"message": f"stockade: the host's container engine is not answering at {engine} (start it, or set [containers] socket)"}
    )


def sweep(engine: str, alive: Callable[[str], bool]) -> int:
    """Remove containers and volumes labelled by runs that are gone (killed before their end); how many.
    `alive(session)` is False only for a run of this user's that is gone (its folder here, its lock
    free): another user's runs on a shared engine, and what a run kept (KEPT_LABEL), are never taken."""
    gates: dict[str, Gate] = {}

    def gate_of(session: str) -> Gate:
        return gates.setdefault(session, Gate(engine, "", session, (), False))

    status, found = Gate(engine, "", "", (), False)._call("GET", "/containers/json?all=true&filters=" + quote(json.dumps({"label": [LABEL]})))
    for item in found if status == 200 and isinstance(found, list) else ():
        session = str((item.get("Labels") or {}).get(LABEL, ""))
        if session and not alive(session) and isinstance(item.get("Id"), str):
            gate_of(session).containers[item["Id"]] = ""
    status, volumes = Gate(engine, "", "", (), False)._call("GET", "/volumes?filters=" + quote(json.dumps({"label": [LABEL]})))
    for item in (volumes or {}).get("Volumes") or () if status == 200 and isinstance(volumes, dict) else ():
        session = str((item.get("Labels") or {}).get(LABEL, ""))
        if session and not alive(session) and isinstance(item.get("Name"), str):
            gate_of(session).volumes.add(item["Name"])
    for gate in gates.values():
        gate.remove_all()
    return sum(len(gate.containers) + len(gate.volumes) for gate in gates.values())


def split_url(url: str) -> str:
    """The path of a unix:// URL (DOCKER_HOST, CONTAINER_HOST); "" for any other."""
    parts = urlsplit(url)
    return parts.path if parts.scheme == "unix" else ""
