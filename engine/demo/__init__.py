"""The drift study behind ``ctxledger demo``: a seeded synthetic agent session with known ground
truth (``workload``), a simulated summarizing model that drifts the way the seed describes
(``simmodel``), the same session under prune-only, naive recursive summarization, the guarded
policy and the model editing its own buffer through the context tools (``study``, ``editor``), and
the forensic story read back from the ledger (``story``). ``RealModel`` runs it with a real model.

    from engine import Ledger
    from engine.demo import StudyConfig, run_study
    result = run_study(Ledger.open("memory://"), StudyConfig(cycles=12))
    result.runs["naive"].final.invented
"""

from engine.demo.editor import SimulatedEditor
from engine.demo.simmodel import DriftingModel
from engine.demo.story import Story, tell
from engine.demo.study import POLICIES, RealModel, RunResult, StudyConfig, StudyResult, run_study, session_names
from engine.demo.workload import Workload, generate

__all__ = [
    "StudyConfig",
    "StudyResult",
    "RunResult",
    "POLICIES",
    "RealModel",
    "run_study",
    "session_names",
    "DriftingModel",
    "SimulatedEditor",
    "Workload",
    "generate",
    "Story",
    "tell",
]
