"""Every call spectrn makes to the Kubernetes API goes through this module.

``KubeApi`` is the small interface the rest of spectrn uses (deploy, status, teardown, in-cluster bench,
the kind helper). ``RealKube`` implements it with the official ``kubernetes`` client, which is imported
inside the constructor so that ``spectrn --help`` never pays for it; ``doubles.kube_fake.FakeKube``
implements it in memory for tests.

Objects are plain dicts (the same shape as the YAML spectrn renders). Generic object calls are raw REST
requests built from ``apiVersion`` and ``kind``: the plural and scope of the kinds spectrn renders are
known below, and any other kind is resolved once through API discovery.

Server-side apply: ``apply`` sends the whole object as ``application/apply-patch+yaml`` with the field
manager ``spectrn`` and ``force=true``. Forcing means that when another manager (``kubectl edit``, a
controller, an earlier ``kubectl apply``) owns a field spectrn renders, spectrn takes the field over
instead of failing with 409 Conflict: the rendered configuration is the source of truth for the fields it
sets, while fields spectrn does not set (e.g. an HPA's replicas on an object without ``replicas``) stay
with their owner.

Errors: every failure becomes ``KubeApiError`` (a ``spectrn.errors.KubeError``) that keeps the API
server's own message from its ``Status`` body, the HTTP status and the reason (``NotFound``,
``Forbidden``, ``Conflict``, ``Expired``...), and a hint naming the next step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from spectrn.kube.api import (
    FIELD_MANAGER,
    KNOWN_KINDS,
    KubeApi,
    KubeApiError,
    Obj,
    ObjList,
    Propagation,
    QueryList,
    ResourceInfo,
    StrList,
    api_error,
    api_prefix,
    connection_error,
    describe,
    one_line,
    translate_api_exception,
)

# ---- the real client ----------------------------------------------------------------------------


def _selector_query(label_selector: str | None) -> QueryList:
    return [("labelSelector", label_selector)] if label_selector else []


class RealKube:
    """``KubeApi`` over the official client: kubeconfig (optionally a context) or in-cluster config."""

    def __init__(
        self,
        *,
        context: str | None = None,
        kubeconfig: str | None = None,
        request_timeout_s: float = 60,
        api_client: Any = None,
    ) -> None:
        from kubernetes import client, config

        self._timeout = request_timeout_s
        self._context: str
        if api_client is not None:
            self._api = api_client
            self._context = context or "custom"
        else:
            self._api, self._context = self._load(client, config, context, kubeconfig)
        self._discovered: dict[tuple[str, str], ResourceInfo] = {}
        self._versions: set[str] | None = None

    def _load(self, client: Any, config: Any, context: str | None, kubeconfig: str | None) -> tuple[Any, str]:
        """The API client and the name of the context it speaks to."""
        import os

        import yaml

        # In a pod (the in-cluster bench) without a kubeconfig, use the pod's service account. A kubeconfig named
        # by KUBECONFIG wins, as for kubectl and the client's own load_config (which reads KUBECONFIG first).
        use_in_cluster = (
            not kubeconfig
            and not context
            and not os.environ.get("KUBECONFIG")
            and "KUBERNETES_SERVICE_HOST" in os.environ
            and not os.path.exists(os.path.expanduser("~/.kube/config"))
        )
        cfg = client.Configuration()
        source = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        fix = (
            "fix the file, or pass --kubeconfig with a valid one (e.g. from `aws eks update-kubeconfig --name CLUSTER`)"
        )
        if kubeconfig and not os.path.exists(os.path.expanduser(kubeconfig)):
            raise KubeApiError(
                f"kubeconfig {kubeconfig} not found",
                reason="ConfigError",
                hint="check the --kubeconfig path, or create it (e.g. `aws eks update-kubeconfig --name CLUSTER`)",
            )
        try:
            if use_in_cluster:
                config.load_incluster_config(client_configuration=cfg)
                name = "in-cluster"
            else:
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
                if context:
                    name = context
                else:
                    # the active context: load_kube_config has just found it by this name
                    _, active = config.list_kube_config_contexts(config_file=kubeconfig)
                    name = str(active["name"])
        except config.ConfigException as e:
            where = "the in-cluster service account" if use_in_cluster else f"kubeconfig {source}"
            raise KubeApiError(
                f"cannot load the Kubernetes configuration from {where}: {one_line(e)}",
                reason="ConfigError",
                hint="point --kubeconfig at a valid file, pick a context with --context, or run inside a pod",
            ) from None
        except yaml.YAMLError as e:
            raise KubeApiError(
                f"kubeconfig {source} is not valid YAML: {one_line(e)}", reason="ConfigError", hint=fix
            ) from None
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, OSError) as e:
            # The client walks the parsed YAML without checking its shape: a file that is not UTF-8 or YAML of
            # the wrong shape (a string, a number where a list belongs) surfaces as one of these, and so does a
            # credential program the file names that is not installed (FileNotFoundError).
            raise KubeApiError(
                f"kubeconfig {source} is not a valid kubeconfig: {type(e).__name__}: {one_line(e)}",
                reason="ConfigError",
                hint=fix,
            ) from None
        return client.ApiClient(cfg), name

    @property
    def context(self) -> str:
        return self._context

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    # -- raw requests -----------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        query: QueryList | None = None,
        body: Any = None,
        content_type: str = "application/json",
        action: str,
        stream: bool = False,
        timeout_s: float | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            req = self._api.param_serialize(
                method,
                path,
                query_params=query or None,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self._api.call_api(*req, _request_timeout=timeout_s or self._timeout)
        except Exception as e:
            # urllib3 transport errors, and the REST layer's ApiException with status 0 (an SSL error): HTTP
            # failures come back as responses (the client only raises them for Retry-After with client-go
            # retries, which spectrn does not turn on)
            raise connection_error(e, action=action, host=self.host) from None
        if stream:
            if not 200 <= resp.status <= 299:
                raise api_error(resp.status, str(resp.reason or ""), resp.read(), action=action)
            return resp.response
        data = resp.read()
        if not 200 <= resp.status <= 299:
            raise api_error(resp.status, str(resp.reason or ""), data, action=action)
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError:
            return data

    def _info(self, api_version: str, kind: str) -> ResourceInfo:
        known = KNOWN_KINDS.get(kind)
        if known is not None:
            return known
        key = (api_version, kind)
        if key not in self._discovered:
            listing = self._request("GET", api_prefix(api_version), action=f"discover {api_version}")
            for res in listing.get("resources") or []:
                if "/" not in res["name"]:
                    self._discovered[(api_version, res["kind"])] = ResourceInfo(
                        res["name"], bool(res.get("namespaced"))
                    )
            if key not in self._discovered:
                raise KubeApiError(
                    f"the cluster serves no kind {kind} in {api_version}",
                    status=404,
                    reason="NotFound",
                    hint="install the CRD or API group that provides it, or choose another resources_mode",
                )
        return self._discovered[key]

    def _path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        info = self._info(api_version, kind)
        parts = [api_prefix(api_version)]
        if info.namespaced:
            if not namespace:
                raise KubeApiError(
                    f"{kind} {name or ''} needs a namespace", reason="Invalid", hint="set metadata.namespace"
                )
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(info.plural)
        if name:
            parts.append(quote(name, safe=""))
        return "/".join(parts)

    # -- KubeApi ------------------------------------------------------------------------------------
    def apply(self, obj: Obj, *, field_manager: str = FIELD_MANAGER, force: bool = True, dry_run: bool = False) -> Obj:
        meta = obj.get("metadata") or {}
        path = self._path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        query = [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        result: Obj = self._request(
            "PATCH",
            path,
            query=query,
            body=obj,
            content_type="application/apply-patch+yaml",
            action=f"apply {describe(obj)}",
        )
        return result

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        try:
            result: Obj = self._request(
                "GET", self._path(api_version, kind, namespace, name), action=f"get {kind} {namespace or ''}/{name}"
            )
        except KubeApiError as e:
            if e.not_found:
                return None
            raise
        return result

    def list_meta(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjList, str]:
        items: ObjList = []
        path = self._path(api_version, kind, namespace)
        selector = _selector_query(label_selector)
        cont: QueryList = []
        while True:
            page = self._request(
                "GET",
                path,
                query=selector + cont + [("limit", "500")],
                action=f"list {kind} in {namespace or 'the cluster'}",
            )
            for item in page.get("items") or []:
                # List items omit apiVersion and kind; put them back so every object describes itself.
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            cont = [("continue", token)]

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjList:
        return self.list_meta(api_version, kind, namespace, label_selector)[0]

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_s: float = 30,
    ) -> Iterator[tuple[str, Obj]]:
        query = _selector_query(label_selector) + [("watch", "true"), ("timeoutSeconds", str(max(1, int(timeout_s))))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        action = f"watch {kind} in {namespace or 'the cluster'}"
        raw = self._request(
            "GET",
            self._path(api_version, kind, namespace),
            query=query,
            action=action,
            stream=True,
            timeout_s=timeout_s + 10,
        )
        buf = b""
        try:
            for chunk in raw.stream(8192, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield self._watch_event(line, action)
            if buf.strip():
                yield self._watch_event(buf, action)
        except KubeApiError:
            raise
        except Exception as e:  # connection reset mid-stream
            raise connection_error(e, action=action, host=self.host) from None
        finally:
            raw.release_conn()

    @staticmethod
    def _watch_event(line: bytes, action: str) -> tuple[str, Obj]:
        event = json.loads(line)
        etype = str(event["type"])
        obj = event.get("object") or {}
        if etype == "ERROR":
            # the Status object carries the reason, which api_error reads from it
            raise api_error(int(obj.get("code") or 500), "", json.dumps(obj), action=action)
        return etype, obj

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> bool:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        try:
            self._request(
                "DELETE",
                self._path(api_version, kind, namespace, name),
                body=body,
                action=f"delete {kind} {namespace or ''}/{name}",
            )
        except KubeApiError as e:
            if e.not_found:
                return False
            raise
        return True

    def pod_logs(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        query: QueryList = []
        if container:
            query.append(("container", container))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if previous:
            query.append(("previous", "true"))
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/log"
        raw = self._request("GET", path, query=query, action=f"logs of pod {namespace}/{name}", stream=True)
        try:
            return bytes(raw.data).decode("utf-8", "replace")
        finally:
            raw.release_conn()

    def events_for(self, kind: str, name: str, namespace: str) -> ObjList:
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        page = self._request(
            "GET",
            f"/api/v1/namespaces/{quote(namespace, safe='')}/events",
            query=[("fieldSelector", selector)],
            action=f"events of {kind} {namespace}/{name}",
        )
        events: ObjList = list(page.get("items") or [])
        events.sort(key=_event_time)
        return events

    def exec(
        self, pod: str, namespace: str, command: StrList, *, container: str | None = None, timeout_s: float = 300
    ) -> bytes:
        from kubernetes import client
        from kubernetes.stream import stream

        action = f"exec {' '.join(command[:3])} in pod {namespace}/{pod}"
        kwargs: dict[str, Any] = dict(command=command, stderr=True, stdin=False, stdout=True, tty=False)
        if container:
            kwargs["container"] = container
        try:
            resp = stream(
                client.CoreV1Api(self._api).connect_get_namespaced_pod_exec,
                pod,
                namespace,
                _preload_content=False,
                binary=True,
                **kwargs,
            )
            try:
                resp.run_forever(timeout=timeout_s)
                out = resp.read_channel(1)
                err = resp.read_channel(2)
                if resp.is_open():
                    raise KubeApiError(
                        f"{action}: did not finish within {timeout_s:.0f} s",
                        reason="Timeout",
                        hint="re-run; the pod may be overloaded",
                    )
                rc = resp.returncode
            finally:
                # websocket-client's close() is a no-op once the server closed the stream, which leaves the
                # socket open; shutdown() really closes it.
                resp.close()
                resp.sock.shutdown()
        except KubeApiError:
            raise
        except Exception as e:
            raise _exec_error(e, action) from None
        if rc:
            raise KubeApiError(
                f"{action}: exit status {rc}: {bytes(err).decode('utf-8', 'replace').strip()[-500:]}",
                reason="ExecFailed",
                hint="check that the pod is still running and the path exists",
            )
        return bytes(out)

    def api_versions(self) -> set[str]:
        if self._versions is None:
            core = self._request("GET", "/api", action="discover the core API")
            versions = {str(v) for v in core.get("versions") or []}
            groups = self._request("GET", "/apis", action="discover API groups")
            for group in groups.get("groups") or []:
                for v in group.get("versions") or []:
                    versions.add(str(v["groupVersion"]))
            self._versions = versions
        return set(self._versions)

    def can_i(
        self, verb: str, resource: str, *, group: str = "", namespace: str | None = None, subresource: str = ""
    ) -> bool:
        attrs: dict[str, str] = {"verb": verb, "resource": resource, "group": group}
        if namespace:
            attrs["namespace"] = namespace
        if subresource:
            attrs["subresource"] = subresource
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        result = self._request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=review,
            action=f"check permission {verb} {resource}",
        )
        return bool((result.get("status") or {}).get("allowed"))

    def patch_node_status(self, name: str, patch: ObjList) -> Obj:
        result: Obj = self._request(
            "PATCH",
            f"/api/v1/nodes/{quote(name, safe='')}/status",
            body=patch,
            content_type="application/json-patch+json",
            action=f"patch status of node {name}",
        )
        return result


# websocket-client's text for a refused upgrade: ``Handshake status CODE PHRASE -+-+- HEADERS -+-+- BODY``, the
# body decoded or the word None when the answer had none
_HANDSHAKE = re.compile(r"Handshake status (\d{3}) (.*?) -\+-\+- .* -\+-\+- (.*)", re.S)


def _exec_error(exc: BaseException, action: str) -> KubeApiError:
    """The error of a refused exec: the API server's answer to the WebSocket upgrade (a missing pod is a 404,
    a missing permission a 403) arrives as websocket-client's handshake text, which the client wraps in an
    ``ApiException`` of status 0; anything else is a transport failure."""
    refused = _HANDSHAKE.fullmatch(str(getattr(exc, "reason", None)))
    if refused is None:
        return translate_api_exception(exc, action=action)
    body = refused[3] if refused[3] != "None" else ""
    return api_error(int(refused[1]), refused[2], body, action=action)


_NO_TIME = datetime.min.replace(tzinfo=UTC)


def _event_time(ev: Obj) -> datetime:
    """When an event was last seen: ``lastTimestamp`` (whole seconds), else ``eventTime`` (microseconds: events
    written through events.k8s.io/v1 leave ``lastTimestamp`` null), else the object's creation. Compared as
    instants, not as text: ``00:00:03Z`` is before ``00:00:03.500000Z`` though it sorts after it as text."""
    stamp = ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp))  # RFC 3339 in UTC ("Z"), as the API server writes every time
    except ValueError:
        return _NO_TIME


def connect(*, context: str | None = None, kubeconfig: str | None = None) -> KubeApi:
    """The real client for the CLI (in-cluster when run in a pod without a kubeconfig)."""
    return RealKube(context=context, kubeconfig=kubeconfig)
