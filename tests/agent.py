"""A stand-in coding agent, as a real process, driven by the continuity scenarios.

Usage: python agent.py REPO SCENARIO

It opens a session, works on a task through the library (plan, progress, failure), prints
READY and the task id, then, by scenario: waits to be killed (kill, sigterm), exits normally
after a handoff (handoff), or exits after reporting a failure outcome (failure).
"""

import sys
import time

from engram.api import Engram

repo, scenario = sys.argv[1], sys.argv[2]
engram = Engram(cwd=repo)
engram.session_start(agent="claude-code")
engram.close_session_on_exit()
task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
engram.handoff(
    task.id,
    summary="Plan agreed",
    next=["Register the OAuth app", "Write the callback handler", "Write callback tests"],
    must_not_redo=[
        "Create the production OAuth app in GitHub (done; creating another breaks the live config)"
    ],
    must_preserve=["Do not touch the main branch"],
    files=["src/auth.py"],
)
engram.progress(
    task.id, "Register the OAuth app", status="done", component="auth", files=["src/auth.py"]
)
engram.progress(task.id, "Write the callback handler", status="in_progress", component="auth")
engram.failure(
    task.id,
    "Callback returns 500: state mismatch",
    component="auth",
    root_cause="the session cookie is not set before the redirect",
)
if scenario == "handoff":
    engram.handoff(
        task.id,
        summary="Callback handler fixed; tests next",
        completed=["Write the callback handler"],
        next=["Write callback tests"],
    )
print("READY", task.id, engram.session, flush=True)
if scenario in ("kill", "sigterm"):
    while True:  # keep working (and beating) until killed
        engram.heartbeat()
        time.sleep(0.2)
if scenario == "failure":
    engram.session_end(outcome="failure")
