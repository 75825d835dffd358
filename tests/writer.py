"""A child process that writes memories through the API and prints each acknowledged id.

Usage: python writer.py DIR COUNT LABEL
"""

import sys

from engram.api import Engram

directory, count, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
engram = Engram(cwd=directory)
for number in range(count):
    memory = engram.remember(f"{label} memory {number}", check_duplicates=False)
    print(memory.id, flush=True)
