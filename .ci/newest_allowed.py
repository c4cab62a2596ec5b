"""Fail when the venv holds anything older than what a new user's `pip install` resolves today.

pip's own resolver is asked, without installing, what an eager upgrade of the project's extras would
change; anything but the project itself means CI would test versions no new user gets (a new
redis-py release once turned a warning into a failing test on fresh clones only).
"""

import json
import subprocess
import sys

extras = sys.argv[1] if len(sys.argv) > 1 else "test,docs"
report = subprocess.run(
    [sys.executable, "-m", "pip", "install", "--dry-run", "-q", "--upgrade", "--upgrade-strategy", "eager", "--report", "-", "-e", f".[{extras}]"],
    check=True, capture_output=True, text=True,
).stdout
newer = [f"{item['metadata']['name']} {item['metadata']['version']}" for item in json.loads(report)["install"] if item["metadata"]["name"] != "pinch-router"]
if newer:
    sys.exit(f"the venv is not what a fresh install resolves today; newer allowed: {', '.join(newer)}")
print("dependencies: the newest allowed versions, as a fresh install resolves them today")
