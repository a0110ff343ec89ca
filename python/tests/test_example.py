"""examples/agent.py runs against the server and shows the memory it claims to."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import psycopg

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "agent.py"


def test_the_example_agent_loop(dsn: str, user: str, admin: psycopg.Connection):
    out = subprocess.run([sys.executable, str(EXAMPLE), "--dsn", dsn, "--user", user], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "memory: UPDATE Lives in Porto" in text and "memory: DELETE Is not allergic to peanuts" in text
    final = text.split("=== what is remembered now ===")[1]
    assert "Lives in Porto" in final and "allergic" not in final.split("history of")[0]
    assert "Lives in Lisbon (superseded)" in final and "Lives in Porto (moved from Lisbon) (current)" in final
    # The last session's prompts were built from memory: the standing instruction, and the hike.
    last = text.split("=== session-3 ===")[1]
    assert "## Standing instructions" in last and "Peneda-Gerês" in last
    turns = admin.execute("SELECT count(*) FROM agent_memory.turns WHERE user_id = %s", [user]).fetchone()[0]
    assert turns == 16  # 8 user turns and 8 answers


def test_a_real_model_plugs_in_by_command(dsn: str, user: str):
    # Any command that reads the prompt and prints an answer; here one that reports the prompt's size.
    cmd = f"{sys.executable} -c \"import sys; print('prompt of', len(sys.stdin.read()), 'characters')\""
    out = subprocess.run([sys.executable, str(EXAMPLE), "--dsn", dsn, "--user", user, "--model-command", cmd],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert sum(line.startswith("assistant: prompt of ") for line in out.stdout.splitlines()) == 8
