import sys
from pathlib import Path

# the tests import their shared helpers (smith_folders) from this folder
sys.path.insert(0, str(Path(__file__).resolve().parent))
