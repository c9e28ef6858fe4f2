"""``memoryos``'s seven LLM steps through a real ``openai``-kind LLM (memcore-llm's chat
client) talking HTTP to a local OpenAI-compatible server on 127.0.0.1 that answers each
MemoryOS prompt deterministically (and, when told to, with a server error)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("memcore_llm")

PROFILE = "Alice is a bank employee who recently moved to Zurich and owns a cat named Pixel."
REPLIES = {
    "continuity detector": "true",
    "meta-summary updater": "Alice tells Bob about her move to Zurich and her cat.",
    "user profiling": PROFILE,
    "extract user private data": "【User Private Data】\n- Alice works at a bank in Zurich (May 2023)\n- Alice has a cat, Pixel\n【Assistant Knowledge】\n- None",
    "Summarise the following": "Alice and Bob talked about Zurich.",
    "subtopic summaries": 'Here you go:\n[{"theme": "Moving", "keywords": ["Zurich", "move"], "content": "Alice moved to Zurich."}]',
    "topic segment": '{"summary": "Alice moved to Zurich with her cat Pixel.", "keywords": ["zurich", "cat"]}',
}


class ChatServer:
    """A ThreadingHTTPServer on a free port answering ``POST /v1/chat/completions``."""

    def __init__(self):
        self.prompts: list[str] = []
        self.fail: set[str] = set()  # prompt markers answered with HTTP 500
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                server.prompts.append(prompt)
                marker = next((m for m in REPLIES if m in prompt), None)
                if marker is None or marker in server.fail:
                    self.send_response(500 if marker else 400)
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "no"}}')
                    return
                reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": REPLIES[marker]}}], "model": body["model"]}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chat_server():
    server = ChatServer()
    yield server
    server.close()


DIALOGUE = [
    ("(1 May 2023) Alice: I moved to Zurich for my new job at a bank\n(1 May 2023) Bob: That sounds like a big change", ["D1:1", "D1:2"]),
    ("(1 May 2023) Alice: My cat Pixel hates the tram\n(1 May 2023) Bob: I adopted a dog last spring", ["D1:3", "D1:4"]),
    ("(1 May 2023) Alice: The lake is lovely in summer\n(1 May 2023) Bob: We should go swimming there", ["D1:5", "D1:6"]),
]


def _open(opener, path, url, **service):
    llm = {"kind": "openai", "base_url": url, "model": "memoryos-test", "max_retries": 0, "timeout_s": 10}
    entry = {"kind": "memoryos", "stm_capacity": 1, "segment_threshold": -1.0, "heat_threshold": 3.0, **service}
    return opener(path, entry, llms={"default": llm})


def test_memoryos_steps_through_an_http_llm(opener, tmp_path, chat_server):
    with _open(opener, tmp_path, chat_server.url) as m:
        ids = [m.insert(t, metadata={"session": 1, "dia_ids": d}) for t, d in DIALOGUE]
        c = m.collection
        steps = m.service.llm_report()
        assert steps["model"] == "memoryos-test"
        assert steps["steps"] == {
            "meta_info": {"llm": 2},
            "continuity": {"llm": 1},
            "multi_summary": {"llm": 2},
            "segment_summary": {"llm": 1},
            "profile": {"llm": 1},
            "knowledge": {"llm": 1},
        }
        (seg,) = [k for k in c.state_items("memoryos") if k.startswith("s:")]  # threshold -1: the second batch joined the first
        topic = m.service.topic(seg)
        assert topic["summary"] == "Alice moved to Zurich with her cat Pixel." and topic["keywords"] == ["zurich", "cat"]
        pages = {k[2:]: v for k, v in c.state_items("memoryos").items() if k.startswith("p:")}
        assert pages[ids[1]]["prev"] == ids[0] and pages[ids[0]]["next"] == ids[1]  # the LLM said "true"
        assert c.get("memoryos-profile").text == PROFILE
        facts = {c.get(i).text: c.get(i).metadata for i in c.ids(index="memoryos.user_knowledge")}
        assert set(facts) == {"Alice works at a bank in Zurich (May 2023)", "Alice has a cat, Pixel"}
        assert facts["Alice has a cat, Pixel"]["dia_ids"] == ["D1:3", "D1:4"] and facts["Alice works at a bank in Zurich (May 2023)"]["dia_ids"] == [
            "D1:1",
            "D1:2",
        ]
        hit = next(h for h in m.retrieve("Alice moved to Zurich for her new job at a bank", k=10, chain=True) if h["id"] == ids[0])
        assert hit["chain"] == {"prev": None, "next": ids[1], "meta": REPLIES["meta-summary updater"]}
    assert any("continuity detector" in p for p in chat_server.prompts)


def test_memoryos_falls_back_when_the_llm_fails(opener, tmp_path, chat_server):
    """A server error on the knowledge and profile steps: their fallbacks run (reported as
    such), nothing is lost, the other steps still use the LLM."""
    chat_server.fail = {"extract user private data", "user profiling", "subtopic summaries"}
    with _open(opener, tmp_path, chat_server.url) as m:
        ids = [m.insert(t, metadata={"session": 1, "dia_ids": d}) for t, d in DIALOGUE]
        steps = m.service.llm_report()["steps"]
        assert steps["knowledge"] == {"fallback:first_person_lines": 1} and steps["profile"] == {"fallback:keyword_profile": 1}
        assert steps["meta_info"] == {"llm": 2} and steps["multi_summary"] == {"fallback:central_page": 2} and steps["segment_summary"] == {"llm": 1}
        c = m.collection
        assert set(c.ids(index="memoryos.mtm")) | set(c.ids(index="memoryos.stm")) == set(ids)
        assert c.count(index="memoryos.user_knowledge") == 2  # Alice's two first-person lines of the promoted pages
