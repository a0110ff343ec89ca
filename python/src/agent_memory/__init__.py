"""agent_memory: long-term memory for AI agents in PostgreSQL, from Python.

``Memory`` and ``AsyncMemory`` call the extension's SQL API (text in: the server embeds);
``agent_memory.langgraph.AgentMemoryStore`` is a LangGraph store; ``agent-memory-mcp`` an MCP server.
"""

from .client import AsyncMemory, Memory
from .errors import AgentMemoryError
from .types import ContextItem, Erasure, HistoryEntry, Recalled, Remembered

__all__ = ["AgentMemoryError", "AsyncMemory", "ContextItem", "Erasure", "HistoryEntry", "Memory", "Recalled",
           "Remembered"]
__version__ = "0.10.0"
