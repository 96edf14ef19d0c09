"""Guards: ``ChatContext._upsert_item()`` keeps upstream's semantics, whatever else changed the items.

The session records every tool call and its output with ``_upsert_item()``; the agent's context
records the realtime transcripts that replace their placeholders with it. Upstream looks the
item up with ``index_by_id()``: the first item with that ID is replaced in place, whatever its
position and its ``created_at``; otherwise the item is inserted after the last item created no
later than it. Our build finds it through an index instead of a scan
(tests/regression/test_chat_context_scans.py), and ``items`` is a public list, so the index must
never answer for a list that was changed without it.

Random sequences of upserts, inserts, ``add_message()``, ``remove()``, the ``items`` setter and
direct changes to the ``items`` list, applied to a context and to a plain model of upstream's
rules, must leave the same objects in the same order.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from livekit.agents import llm
from livekit.agents.llm import ChatContext

IDS = [f"item_{n}" for n in range(5)]
TIMES = [1.0, 2.0, 3.0, 4.0]


def make_item(item_id: str, created_at: float, tag: int) -> llm.ChatItem:
    # one type per ID, as the framework's items have (a type mismatch raises)
    if int(item_id.rsplit("_", 1)[1]) % 2:
        return llm.FunctionCall(
            id=item_id, call_id=f"call_{tag}", name="lookup", arguments="{}", created_at=created_at
        )
    return llm.ChatMessage(id=item_id, role="user", content=[f"text {tag}"], created_at=created_at)


class Model:
    """Upstream's rules on a plain list."""

    def __init__(self) -> None:
        self.items: list[llm.ChatItem] = []

    def insertion_index(self, created_at: float) -> int:
        for i in range(len(self.items) - 1, -1, -1):
            if self.items[i].created_at <= created_at:
                return i + 1
        return 0

    def insert(self, item: llm.ChatItem) -> None:
        self.items.insert(self.insertion_index(item.created_at), item)

    def upsert(self, item: llm.ChatItem) -> None:
        for i, existing in enumerate(self.items):
            if existing.id == item.id:
                self.items[i] = item
                return
        self.insert(item)


ITEM = st.tuples(st.sampled_from(IDS), st.sampled_from(TIMES))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), ITEM),
        st.tuples(st.just("upsert"), ITEM),
        st.tuples(st.just("insert"), ITEM),
        st.tuples(st.just("add_message"), ITEM),
        st.tuples(st.just("append"), ITEM),
        st.tuples(st.just("list_insert"), ITEM, st.integers(0, 12)),
        st.tuples(st.just("list_replace"), ITEM, st.integers(0, 12)),
        st.tuples(st.just("list_pop"), st.integers(0, 12)),
        st.tuples(st.just("remove"), st.sampled_from(IDS)),
        st.tuples(st.just("set_items"), st.integers(0, 12)),
        st.tuples(
            st.just("same_items_copied"),
        ),
    ),
    max_size=40,
)


def apply(op: tuple[Any, ...], ctx: ChatContext, model: Model, tag: int) -> None:
    kind = op[0]
    if kind in ("upsert", "insert", "append", "list_insert", "list_replace"):
        item_id, created_at = op[1]
        item = make_item(item_id, created_at, tag)
        if kind == "upsert":
            ctx._upsert_item(item)
            model.upsert(item)
        elif kind == "insert":
            ctx.insert(item)
            model.insert(item)
        elif kind == "append":
            ctx.items.append(item)
            model.items.append(item)
        elif kind == "list_insert":
            ctx.items.insert(op[2], item)
            model.items.insert(op[2], item)
        elif model.items:
            pos = op[2] % len(model.items)
            ctx.items[pos] = item
            model.items[pos] = item
    elif kind == "add_message":
        item_id, created_at = op[1]
        if int(item_id.rsplit("_", 1)[1]) % 2 == 0:
            msg = ctx.add_message(role="assistant", content=f"text {tag}", id=item_id, created_at=created_at)
            model.insert(msg)
    elif kind == "list_pop":
        if model.items:
            pos = op[1] % len(model.items)
            ctx.items.pop(pos)
            model.items.pop(pos)
    elif kind == "remove":
        present = any(i.id == op[1] for i in model.items)
        if present:
            ctx.remove(op[1])
            first = next(i for i, item in enumerate(model.items) if item.id == op[1])
            model.items.pop(first)
    elif kind == "set_items":
        kept = list(model.items[: op[1]])
        ctx.items = list(kept)
        model.items = list(kept)
    elif kind == "same_items_copied":
        # equal items, but other objects: the context must keep returning its own objects
        copies = [item.model_copy() for item in model.items]
        ctx.items = list(copies)
        model.items = list(copies)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
# a second item with an ID inserted after the first: the first is still the one replaced
@example([("upsert", ("item_0", 1.0)), ("insert", ("item_0", 2.0)), ("upsert", ("item_0", 3.0))])
@example([("upsert", ("item_0", 2.0)), ("insert", ("item_0", 1.0)), ("upsert", ("item_0", 3.0))])
# items replaced by equal copies: the copies are the ones replaced
@example([("upsert", ("item_0", 1.0)), ("same_items_copied",), ("upsert", ("item_0", 2.0))])
# a realtime placeholder appended, its transcript stamped after the reply
@example(
    [
        ("upsert", ("item_2", 1.0)),
        ("append", ("item_0", 2.0)),
        ("append", ("item_4", 3.0)),
        ("upsert", ("item_4", 4.0)),
        ("upsert", ("item_0", 4.0)),
    ]
)
def test_upsert_follows_upstream_rules_after_any_change(ops: list[tuple[Any, ...]]) -> None:
    ctx = ChatContext.empty()
    model = Model()
    for tag, op in enumerate(ops):
        apply(op, ctx, model, tag)
        assert [id(i) for i in ctx.items] == [id(i) for i in model.items], (op, ctx.items, model.items)


def test_late_transcript_replaces_its_placeholder_in_place() -> None:
    """The realtime case, directly: placeholders appended, the transcript stamped later."""
    ctx = ChatContext.empty()
    ctx._upsert_item(llm.ChatMessage(id="earlier", role="assistant", content=["Hello."], created_at=1.0))
    ctx.items.append(llm.ChatMessage(id="user_1", role="user", content=[], created_at=2.0))
    ctx.items.append(llm.ChatMessage(id="reply_1", role="assistant", content=[], created_at=3.0))
    ctx._upsert_item(llm.ChatMessage(id="reply_1", role="assistant", content=["Sunny."], created_at=4.0))
    ctx._upsert_item(llm.ChatMessage(id="user_1", role="user", content=["Weather?"], created_at=5.0))
    assert [(i.id, i.text_content) for i in ctx.items if i.type == "message"] == [
        ("earlier", "Hello."),
        ("user_1", "Weather?"),
        ("reply_1", "Sunny."),
    ]
