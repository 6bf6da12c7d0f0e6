"""The paper's studies at full scale, with a resumable result store and a report.

- `studies`: the eight studies of issue 6 as data (`STUDIES`, `get_study`);
- `spec`: a variant's run configuration made a run: its command and store key (`SuiteSettings`);
- `runner`: `Suite` plans the runs of studies over seeds and executes the missing ones;
- `store`: `ResultStore`, one finished run per key, never recomputed;
- `analysis`, `claims`: statistics over seeds and the paper's claims checked against them;
- `plots`, `report`: the report folder (markdown, PNG, CSV, JSON).

`fedhh experiments` (``fedhh.cli.experiments``) drives them; see docs/experiments.md.
"""

from fedhh.experiments.runner import PlannedRun, ProgressEvent, Suite
from fedhh.experiments.spec import SuiteSettings
from fedhh.experiments.store import ResultStore, RunRecord
from fedhh.experiments.studies import STUDIES, STUDY_NAMES, Study, StudyVariant, get_study

__all__ = [
    "STUDIES",
    "STUDY_NAMES",
    "PlannedRun",
    "ProgressEvent",
    "ResultStore",
    "RunRecord",
    "Study",
    "StudyVariant",
    "Suite",
    "SuiteSettings",
    "get_study",
]
