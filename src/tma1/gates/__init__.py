"""The three validation gates (design §2.13–2.14): the daily emit budget, the action
follow-rate and precision.

`budget`, `follow`, `precision` and `table` are pure: figures from rows. `live` fetches
those rows through tma1.store and keeps the follow-rate's verdict cache. Shared by the
HTTP API (server/routes_gates.py), the CLI (commands/anomalies.py) and replay, so the
figures a human sees on the dashboard and in `tma1 gates` are computed by the same code.
Below: what those callers use of the pure part. `live` is imported by name where the store
is at hand (`from tma1.gates import live`): importing this package must not import the
store, or every `tma1` command would pay SQLAlchemy's import to build its --help.
"""

from tma1.engine.anomaly import LABEL_SOURCES as LABEL_SOURCES
from tma1.gates.budget import budget_of_emits as budget_of_emits
from tma1.gates.common import CHANNELS as CHANNELS
from tma1.gates.common import DAY_MS as DAY_MS
from tma1.gates.common import DEFAULT_BUDGET as DEFAULT_BUDGET
from tma1.gates.common import DEFAULT_DAYS as DEFAULT_DAYS
from tma1.gates.common import DEFAULT_WINDOW as DEFAULT_WINDOW
from tma1.gates.common import FOLLOW_MIN_EMITS as FOLLOW_MIN_EMITS
from tma1.gates.common import KINDS as KINDS
from tma1.gates.common import PRECISION_MIN_LABELS as PRECISION_MIN_LABELS
from tma1.gates.common import PRECISION_SAMPLE as PRECISION_SAMPLE
from tma1.gates.common import SEVERITIES as SEVERITIES
from tma1.gates.common import loads_list as loads_list
from tma1.gates.common import since_for_days as since_for_days
from tma1.gates.follow import follow_report as follow_report
from tma1.gates.follow import judge_events as judge_events
from tma1.gates.table import gate_table as gate_table
from tma1.gates.table import status_text as status_text
