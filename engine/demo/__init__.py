"""The drift study behind ``ctxledger demo``: a seeded synthetic agent session with known ground
truth (``workload``), a simulated summarizing model that drifts the way the seed describes
(``simmodel``), the same session under prune-only, naive recursive summarization and the guarded
policy (``study``), and the forensic story read back from the ledger (``story``).

    from engine import Ledger
    from engine.demo import StudyConfig, run_study
    result = run_study(Ledger.open("memory://"), StudyConfig(cycles=12))
    result.runs["naive"].final.invented
"""

from engine.demo.simmodel import DriftingModel
from engine.demo.story import Story, tell
from engine.demo.study import POLICIES, RunResult, StudyConfig, StudyResult, run_study, session_names
from engine.demo.workload import Workload, generate

__all__ = [
    "StudyConfig",
    "StudyResult",
    "RunResult",
    "POLICIES",
    "run_study",
    "session_names",
    "DriftingModel",
    "Workload",
    "generate",
    "Story",
    "tell",
]
