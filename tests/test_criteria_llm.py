"""Criteria extraction through an OpenAI-compatible API, against a fake server on localhost."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from usl.data.criteria_llm import CriteriaExtractor, ExtractorConfig, extract_file, parse_reply
from usl.data.paper_jsonl import read_samples, write_samples
from usl.types import DataError, Message, PreferenceSample


class _Fake(BaseHTTPRequestHandler):
    replies: list[str] = []
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Fake.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        content = _Fake.replies.pop(0)
        if content == "500":
            self.send_response(500)
            self.end_headers()
            return
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = HTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Fake.replies, _Fake.seen = [], []
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()


def _sample(pref: str) -> PreferenceSample:
    q = Message("user", "Explain tides.")
    return PreferenceSample("1", "Explain tides.", (q, Message("assistant", "The moon.")),
                            (q, Message("assistant", "Tides are caused by the moon's gravity ... " * 5)),
                            ("placeholder",), pref)  # type: ignore[arg-type]


def test_extract_file_maps_winner_and_loser_criteria(server, tmp_path):
    _Fake.replies = ['{"a_criteria": ["I prefer short answers"], "b_criteria": ["Explain in depth"]}'] * 2
    write_samples(tmp_path / "in.jsonl", [_sample("model_b"), PreferenceSample(
        "2", "q", (Message("user", "q"), Message("assistant", "a")), (Message("user", "q"), Message("assistant", "b")),
        ("x",), "model_a")])
    ext = CriteriaExtractor(ExtractorConfig(base_url=server, model="fake", api_key="k"))
    assert extract_file(ext, tmp_path / "in.jsonl", tmp_path / "out.jsonl") == 2
    out = read_samples(tmp_path / "out.jsonl")
    assert out[0].criteria == ("Explain in depth",) and dict(out[0].meta)["loser_criteria"] == '["I prefer short answers"]'
    assert out[1].criteria == ("I prefer short answers",)
    req = _Fake.seen[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer k"
    assert req["body"]["model"] == "fake" and "preferred: B" in req["body"]["messages"][1]["content"]


def test_server_error_and_bad_reply(server):
    ext = CriteriaExtractor(ExtractorConfig(base_url=server))
    _Fake.replies = ["500"]
    with pytest.raises(DataError, match="criteria extraction failed"):
        ext.extract("q", "a", "b", "model_a")
    _Fake.replies = ["I think A is better."]
    with pytest.raises(DataError, match="no JSON object"):
        ext.extract("q", "a", "b", "model_a")


@pytest.mark.parametrize("reply, match", [
    ('{"a_criteria": "short", "b_criteria": []}', "must be a list of strings"),
    ('{"a_criteria": [], "b_criteria": []}', "no criteria for either side"),
    ('{"a_criteria": [1}', "not valid JSON"),
])
def test_parse_reply_rejects(reply, match):
    with pytest.raises(DataError, match=match):
        parse_reply(reply)
