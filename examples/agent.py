#!/usr/bin/env python3
"""An agent's memory at work, from Python: three sessions of one user.

Every turn is recorded; the facts a turn states are reconciled (one changes, one is negated); and
each answer's prompt is built with ``context(...)``, which is printed, so you see exactly what a
model would be given. No language model is needed: a scripted one answers from the prompt. Plug a
real one with ``--model-command``: the prompt goes to the command's standard input and its output
is the answer (for example ``--model-command "llm -m gpt-4o-mini"``).

    pip install ./python
    python examples/agent.py --dsn "host=/path/to/socket port=28835 dbname=agent_memory_demo"
    (or set AGENT_MEMORY_DSN)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid

from agent_memory import Memory

# What the user says in each session, and the facts an extraction step would draw from each turn
# (here written out; an agent would ask its model for them).
SESSIONS = [
    ("session-1", [
        ("I live in Lisbon and I work as a nurse, mostly night shifts.",
         [dict(subject="user", predicate="city", object="Lisbon", text="Lives in Lisbon"),
          dict(subject="user", predicate="job_title", object="nurse", text="Works as a nurse, mostly night shifts")]),
        ("Please keep your answers short, I read them on my phone.",
         [dict(text="Keep answers short: the user reads them on a phone", kind="procedural")]),
        ("I'm allergic to peanuts, so be careful with recipes.",
         [dict(subject="user", predicate="allergy", object="peanuts", text="Is allergic to peanuts")]),
    ]),
    ("session-2", [
        ("Big news: I moved to Porto last month!",
         [dict(subject="user", predicate="city", object="Porto", text="Lives in Porto (moved from Lisbon)")]),
        ("Turns out the peanut thing was a misdiagnosis, I'm not allergic after all.",
         [dict(subject="user", predicate="allergy", object="peanuts", text="Is not allergic to peanuts", negate=True)]),
        ("We went hiking in Peneda-Gerês on Saturday, it was beautiful.",
         [dict(text="Went hiking in Peneda-Gerês national park", kind="episodic")]),
    ]),
    ("session-3", [
        ("Can you suggest a quick dinner I could make after a night shift here in town?", []),
        ("Where did I go hiking recently?", []),
    ]),
]


def scripted_model(prompt: str) -> str:
    """Answers from the memory the prompt holds: a stand-in for a language model."""
    section, known = "", []
    for line in prompt.splitlines():
        if line.startswith("## "):
            section = line
        elif section == "## What is known about the user" and line.startswith("- ["):
            known.append(line.split("] ", 1)[1])
    return f"(scripted) What I remember that bears on this: {'; '.join(known[:2]) or 'nothing yet'}."


def model_command(command: str):
    def ask(prompt: str) -> str:
        out = subprocess.run(command, shell=True, input=prompt, capture_output=True, text=True, check=True)
        return out.stdout.strip()
    return ask


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("AGENT_MEMORY_DSN"), help="the database (libpq string or URI)")
    parser.add_argument("--user", default=f"example-{uuid.uuid4().hex[:8]}", help="the user id (default: a new one)")
    parser.add_argument("--model-command", help="a command that reads a prompt on stdin and prints the answer")
    parser.add_argument("--token-budget", type=int, default=400)
    args = parser.parse_args()
    if not args.dsn:
        parser.error("pass --dsn or set AGENT_MEMORY_DSN")
    ask = model_command(args.model_command) if args.model_command else scripted_model

    with Memory(args.dsn) as memory:
        for session, turns in SESSIONS:
            print(f"\n=== {session} ===")
            for said, facts in turns:
                print(f"\nuser: {said}")
                turn_id = memory.record_turn(args.user, session, "user", said)
                for fact in facts:
                    fact = dict(fact)
                    text = fact.pop("text")
                    r = memory.remember(args.user, text, source_turn_id=turn_id, **fact)
                    print(f"  memory: {r.action:<6} {text}" + (f"  (supersedes #{r.previous_id})" if r.previous_id else ""))
                prompt = memory.context_text(args.user, session, said, args.token_budget)
                print("  --- the prompt's memory ---")
                print("\n".join("  | " + line for line in prompt.splitlines()))
                answer = ask(f"{prompt}\n\nUser: {said}\nAssistant:")
                print(f"assistant: {answer}")
                memory.record_turn(args.user, session, "assistant", answer)

        print("\n=== what is remembered now ===")
        for r in memory.recall(args.user, "where do I live, what do I do, what am I allergic to?", 5):
            print(f"  #{r.id} {r.content}")
        city = memory.recall(args.user, "which city do I live in?", 1)[0]
        print("\nhistory of that city fact:")
        for h in memory.history(city.id, user_id=args.user):
            state = "current" if h.active else h.retired_reason
            print(f"  #{h.id} v{h.version} {h.content} ({state})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
