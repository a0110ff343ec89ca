"""agent-memory-mcp in a real stdio session of the mcp client library."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys

from mcp import Client, StdioServerParameters


def server_command() -> tuple[str, list[str]]:
    """The installed console script, when it is on PATH beside this Python; else the module."""
    script = shutil.which("agent-memory-mcp", path=os.path.dirname(sys.executable))
    return (script, []) if script else (sys.executable, ["-m", "agent_memory.mcp_server"])


def payload(result) -> object:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return result.content[0].text


def test_the_tools_over_stdio(dsn: str, user: str):
    command, args = server_command()
    params = StdioServerParameters(command=command, args=args,
                                   env={"AGENT_MEMORY_DSN": dsn, "AGENT_MEMORY_USER": user,
                                        "PATH": os.environ.get("PATH", "")})

    async def session() -> None:
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"remember", "recall", "context", "forget"}
            # The user is bound at start: no tool lets the model name one.
            assert all("user_id" not in t.input_schema["properties"] for t in tools.values())

            added = payload(await client.call_tool("remember", {"text": "Has a cat named Miso"}))
            assert added["action"] == "ADD" and isinstance(added["memory_id"], int)
            payload(await client.call_tool("remember", {"text": "Lives in Porto", "subject": "user",
                                                        "predicate": "city", "object": "Porto"}))
            moved = payload(await client.call_tool("remember", {"text": "Lives in Braga",
                                                                "subject": "user", "predicate": "city",
                                                                "object": "Braga"}))
            assert moved["action"] == "UPDATE"

            found = payload(await client.call_tool("recall", {"question": "do I have a pet?", "k": 2}))
            assert found[0]["content"] == "Has a cat named Miso" and found[0]["id"] == added["memory_id"]
            city = payload(await client.call_tool("recall", {"question": "where do I live?", "k": 5}))
            assert [r["content"] for r in city if "Lives" in r["content"]] == ["Lives in Braga"]

            prompt = payload(await client.call_tool("context", {"session_id": "s1",
                                                                "question": "what is my cat called?",
                                                                "token_budget": 300}))
            assert "Has a cat named Miso" in prompt and "What is known about the user" in prompt

            gone = payload(await client.call_tool("forget", {"memory_id": added["memory_id"]}))
            assert gone == {"forgotten": True}
            after = payload(await client.call_tool("recall", {"question": "do I have a pet?"}))
            assert all(r["id"] != added["memory_id"] for r in after)

            # A database error reaches the client as the tool's error, with its SQLSTATE and hint.
            bad = await client.call_tool("recall", {"question": "anything", "k": 0})
            assert bad.is_error and "22023" in bad.content[0].text and "HINT" in bad.content[0].text

    asyncio.run(asyncio.wait_for(session(), 120))


def test_a_server_without_a_user_refuses_every_tool(dsn: str, user: str):
    command, args = server_command()
    params = StdioServerParameters(command=command, args=args,
                                   env={"AGENT_MEMORY_DSN": dsn, "PATH": os.environ.get("PATH", "")})

    async def session() -> None:
        async with Client(params) as client:
            # A user id the model slips into the arguments is not a parameter of the tool.
            result = await client.call_tool("recall", {"question": "anything", "user_id": user})
            assert result.is_error and "AGENT_MEMORY_USER" in result.content[0].text, result.content

    asyncio.run(asyncio.wait_for(session(), 120))
