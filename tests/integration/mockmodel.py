"""Mock model server: `mockmodel.py KIND ADDR PORT LOG WORKFILE` serves one
model API on ADDR:PORT (HTTP/1.1, no TLS) until killed, for a real agent CLI
run against it inside a test network namespace. KIND is `openai`, `anthropic`
or `gemini`. Prints "ready" once it listens. Every request is appended to LOG
as one JSON line (method, target, headers, parsed body, what was answered).

Each API plays the same scripted two-step turn:
  step 1  the request holds no tool result: answer with one call of the
          agent's shell tool running `echo gensee-tool-ran >> WORKFILE`
          (WORKFILE relative to the agent's working directory), or the
          command in the file MOCKMODEL_COMMAND_FILE names, when it exists;
  step 2  the request holds a tool result: answer with a final text
          ("gensee-mock-done") and end the turn.
A side request (one that offers no shell tool: title generation, a quota
probe, a JSON-schema classifier) gets a short harmless text, or for a
JSON-schema request a minimal object of that schema. Anything else is a 404,
logged.

Protocol subsets:
  openai     POST /v1/responses (OpenAI Responses API, `stream: true`): SSE
             events response.created, response.output_item.added,
             response.output_item.done, response.completed. Step 1 emits a
             `function_call` item for whichever shell tool the request
             offers (codex: `shell_command` {"command": str},
             `exec_command` {"cmd": str} or `shell` {"command": [argv]}).
             The tool result is an input item `function_call_output`.
             GET /v1/models answers an empty model list.
  anthropic  POST /v1/messages (Anthropic Messages API, streaming or not):
             message_start, content_block_start (tool_use `Bash`
             {"command": str}), content_block_delta (input_json_delta),
             content_block_stop, message_delta (stop_reason tool_use),
             message_stop. The tool result is a `tool_result` content
             block in a user message. POST /v1/messages/count_tokens
             answers {"input_tokens": N}; GET /v1/models an empty list.
  gemini     POST /v1beta/models/MODEL:streamGenerateContent?alt=sse and
             :generateContent (Gemini API): a candidate whose content has a
             `functionCall` part (`run_shell_command` {"command": str}).
             The tool result is a `functionResponse` part.
             :countTokens answers {"totalTokens": N}.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

TOOL_MARK = "gensee-tool-ran"
FINAL_TEXT = "gensee-mock-done"
_lock = threading.Lock()
_counter = [0]


def next_id(prefix):
    with _lock:
        _counter[0] += 1
        return "%s_gensee%04d" % (prefix, _counter[0])


def schema_example(schema):
    """A minimal value that satisfies a JSON schema (first enum choice,
    empty strings replaced by "mock")."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return schema_example(schema[key][0])
    t = schema.get("type")
    if isinstance(t, list):
        t = t[0] if t else None
    t = (t or "object").lower()
    if t == "object":
        props = schema.get("properties") or {}
        return {k: schema_example(v) for k, v in props.items()}
    if t == "array":
        return []
    if t in ("integer", "number"):
        return 0
    if t == "boolean":
        return False
    return "mock"


class MockAPI:
    """Base: routing by (method, path), request logging, SSE and JSON
    writers. A subclass fills ROUTES with (method, predicate, handler)."""

    ROUTES = ()

    def __init__(self, log_path, workfile):
        self.log_path = log_path
        self.workfile = workfile
        self.default_command = "echo %s >> %s" % (TOOL_MARK, workfile)
        # MOCKMODEL_COMMAND_FILE: the command of each step 1, read when asked
        # (a test scripts a misbehaving turn without restarting the mock).
        self.command_file = os.environ.get("MOCKMODEL_COMMAND_FILE")

    @property
    def command(self):
        if self.command_file and os.path.exists(self.command_file):
            with open(self.command_file) as f:
                return f.read().strip() or self.default_command
        return self.default_command

    def log(self, obj):
        obj["time"] = time.time()
        with _lock, open(self.log_path, "a") as f:
            f.write(json.dumps(obj) + "\n")

    def dispatch(self, req, method):
        path = urlsplit(req.path).path
        length = int(req.headers.get("Content-Length") or 0)
        raw = req.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"unparsed": raw[:2000].decode("utf-8", "replace")}
        entry = {"method": method, "target": req.path,
                 "headers": {k.lower(): v for k, v in req.headers.items()},
                 "body": body}
        for m, pred, handler in self.ROUTES:
            if m == method and pred(path):
                try:
                    entry["answer"] = getattr(self, handler)(req, path, body or {})
                except (BrokenPipeError, ConnectionResetError) as e:
                    entry["answer"] = "client went away: %s" % e
                self.log(entry)
                return
        entry["answer"] = "404"
        self.log(entry)
        self.send_json(req, {"error": {"message": "mockmodel: no such endpoint",
                                       "type": "not_found"}}, status=404)

    @staticmethod
    def send_json(req, obj, status=200):
        data = json.dumps(obj).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(data)

    @staticmethod
    def start_sse(req):
        # The body ends when the connection closes (no length, no chunking).
        req.close_connection = True
        req.send_response(200)
        req.send_header("Content-Type", "text/event-stream")
        req.send_header("Cache-Control", "no-cache")
        req.send_header("Connection", "close")
        req.end_headers()

    @staticmethod
    def sse(req, data, event=None):
        chunk = ""
        if event:
            chunk += "event: %s\n" % event
        chunk += "data: %s\n\n" % json.dumps(data)
        req.wfile.write(chunk.encode())
        req.wfile.flush()


class OpenAIResponses(MockAPI):
    """OpenAI Responses API as Codex uses it (wire_api = "responses")."""

    ROUTES = (
        ("POST", lambda p: p.endswith("/responses"), "responses"),
        ("GET", lambda p: p.endswith("/models"), "models"),
    )

    def models(self, req, path, body):
        self.send_json(req, {"object": "list", "data": [], "models": []})
        return "empty model list"

    @staticmethod
    def has_tool_result(body):
        items = body.get("input")
        return isinstance(items, list) and any(
            isinstance(i, dict) and i.get("type") in
            ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
            for i in items)

    def tool_call_item(self, body):
        """The function_call item for the shell tool the request offers."""
        names = {t.get("name") or t.get("type"): t for t in body.get("tools") or []
                 if isinstance(t, dict)}
        if "shell_command" in names:
            name, args = "shell_command", {"command": self.command}
        elif "exec_command" in names:
            name, args = "exec_command", {"cmd": self.command}
        elif "shell" in names:
            name, args = "shell", {"command": ["bash", "-lc", self.command]}
        else:
            return None
        return {"type": "function_call", "id": next_id("fc"), "call_id": next_id("call"),
                "name": name, "arguments": json.dumps(args), "status": "completed"}

    def responses(self, req, path, body):
        if self.has_tool_result(body):
            step, item = "final", None
        else:
            item = self.tool_call_item(body)
            step = "tool_call" if item else "side"
        if item is None:
            text = FINAL_TEXT if step == "final" else "ok"
            item = {"type": "message", "id": next_id("msg"), "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        rid = next_id("resp")
        resp = {"id": rid, "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "model": body.get("model", "mock"), "output": []}
        if not body.get("stream"):
            resp.update(status="completed", output=[item], usage=self.usage())
            self.send_json(req, resp)
            return step
        self.start_sse(req)
        seq = iter(range(1000))
        self.sse(req, {"type": "response.created", "sequence_number": next(seq),
                       "response": resp}, "response.created")
        pending = dict(item, status="in_progress")
        if item["type"] == "function_call":
            pending["arguments"] = ""
        else:
            pending["content"] = []
        self.sse(req, {"type": "response.output_item.added", "sequence_number": next(seq),
                       "output_index": 0, "item": pending}, "response.output_item.added")
        if item["type"] == "message":
            text = item["content"][0]["text"]
            self.sse(req, {"type": "response.output_text.delta", "sequence_number": next(seq),
                           "item_id": item["id"], "output_index": 0, "content_index": 0,
                           "delta": text}, "response.output_text.delta")
        self.sse(req, {"type": "response.output_item.done", "sequence_number": next(seq),
                       "output_index": 0, "item": item}, "response.output_item.done")
        done = dict(resp, status="completed", output=[item], usage=self.usage())
        self.sse(req, {"type": "response.completed", "sequence_number": next(seq),
                       "response": done}, "response.completed")
        return step

    @staticmethod
    def usage():
        return {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15}


class AnthropicMessages(MockAPI):
    """Anthropic Messages API as Claude Code uses it."""

    ROUTES = (
        ("POST", lambda p: p.endswith("/messages/count_tokens"), "count_tokens"),
        ("POST", lambda p: p.endswith("/messages"), "messages"),
        ("GET", lambda p: p.endswith("/models"), "models"),
    )

    def count_tokens(self, req, path, body):
        self.send_json(req, {"input_tokens": 10})
        return "count_tokens"

    def models(self, req, path, body):
        self.send_json(req, {"data": [], "has_more": False, "first_id": None, "last_id": None})
        return "empty model list"

    @staticmethod
    def has_tool_result(body):
        for msg in body.get("messages") or []:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, list) and any(
                    isinstance(c, dict) and c.get("type") == "tool_result" for c in content):
                return True
        return False

    def messages(self, req, path, body):
        offers_bash = any(isinstance(t, dict) and t.get("name") == "Bash"
                          for t in body.get("tools") or [])
        if self.has_tool_result(body):
            step = "final"
        elif offers_bash:
            step = "tool_call"
        else:
            step = "side"
        if step == "tool_call":
            block = {"type": "tool_use", "id": next_id("toolu"), "name": "Bash",
                     "input": {"command": self.command,
                               "description": "Append a line to %s" % self.workfile}}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": FINAL_TEXT if step == "final" else "ok"}
            stop = "end_turn"
        msg = {"id": next_id("msg"), "type": "message", "role": "assistant",
               "model": body.get("model", "mock"), "content": [], "stop_reason": None,
               "stop_sequence": None,
               "usage": {"input_tokens": 10, "output_tokens": 1,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
        if not body.get("stream"):
            msg.update(content=[block], stop_reason=stop)
            msg["usage"]["output_tokens"] = 5
            self.send_json(req, msg)
            return step
        self.start_sse(req)
        self.sse(req, {"type": "message_start", "message": msg}, "message_start")
        if block["type"] == "tool_use":
            self.sse(req, {"type": "content_block_start", "index": 0,
                           "content_block": dict(block, input={})}, "content_block_start")
            self.sse(req, {"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta",
                                     "partial_json": json.dumps(block["input"])}},
                     "content_block_delta")
        else:
            self.sse(req, {"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}, "content_block_start")
            self.sse(req, {"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": block["text"]}},
                     "content_block_delta")
        self.sse(req, {"type": "content_block_stop", "index": 0}, "content_block_stop")
        self.sse(req, {"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": 5}}, "message_delta")
        self.sse(req, {"type": "message_stop"}, "message_stop")
        return step


class GeminiGenerate(MockAPI):
    """Gemini API (generativelanguage v1beta) as Gemini CLI uses it."""

    ROUTES = (
        ("POST", lambda p: p.endswith(":streamGenerateContent"), "stream_generate"),
        ("POST", lambda p: p.endswith(":generateContent"), "generate"),
        ("POST", lambda p: p.endswith(":countTokens"), "count_tokens"),
    )

    def count_tokens(self, req, path, body):
        self.send_json(req, {"totalTokens": 10})
        return "countTokens"

    @staticmethod
    def has_tool_result(body):
        for c in body.get("contents") or []:
            for part in (c.get("parts") or []) if isinstance(c, dict) else []:
                if isinstance(part, dict) and "functionResponse" in part:
                    return True
        return False

    @staticmethod
    def offers_shell(body):
        for tool in body.get("tools") or []:
            for fd in tool.get("functionDeclarations") or []:
                if fd.get("name") == "run_shell_command":
                    return True
        return False

    def reply(self, path, body):
        """(step, candidate) for one request."""
        gen = body.get("generationConfig") or {}
        schema = gen.get("responseJsonSchema") or gen.get("responseSchema")
        if self.has_tool_result(body):
            step, part = "final", {"text": FINAL_TEXT}
        elif self.offers_shell(body):
            step = "tool_call"
            part = {"functionCall": {"name": "run_shell_command",
                                     "args": {"command": self.command,
                                              "description": "Append a line to %s" % self.workfile}}}
        elif schema:
            step, part = "side-json", {"text": json.dumps(schema_example(schema))}
        else:
            step, part = "side", {"text": "ok"}
        cand = {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        return step, cand

    def payload(self, path, cand):
        model = path.rsplit("/", 1)[-1].split(":", 1)[0]
        return {"candidates": [cand],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                  "totalTokenCount": 15},
                "modelVersion": model, "responseId": next_id("gen")}

    def generate(self, req, path, body):
        step, cand = self.reply(path, body)
        self.send_json(req, self.payload(path, cand))
        return step

    def stream_generate(self, req, path, body):
        step, cand = self.reply(path, body)
        self.start_sse(req)
        self.sse(req, self.payload(path, cand))
        return step


KINDS = {"openai": OpenAIResponses, "anthropic": AnthropicMessages, "gemini": GeminiGenerate}


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in KINDS:
        sys.exit("usage: mockmodel.py openai|anthropic|gemini ADDR PORT LOG WORKFILE")
    kind, addr, port, log_path, workfile = sys.argv[1:]
    api = KINDS[kind](log_path, workfile)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            api.dispatch(self, "GET")

        def do_POST(self):
            api.dispatch(self, "POST")

        def do_HEAD(self):
            api.dispatch(self, "HEAD")

        def do_PUT(self):
            api.dispatch(self, "PUT")

        def do_DELETE(self):
            api.dispatch(self, "DELETE")

        def log_message(self, fmt, *args):
            pass

    server = ThreadingHTTPServer((addr, int(port)), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
