"""``status.configData`` is built as a plain dict (function/compose/status.py): it must be
exactly what the XRD's own model (``api.claim.StatusConfigData``) dumps, for any mutation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from function.api.claim import StatusConfigData, StatusSubstitution
from function.compose import status
from function.configdata.fluxmutation import FluxMutation, Trace
from function.ocm.model import Resource

_text = st.text(min_size=0, max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_traces = st.lists(
    st.builds(
        Trace,
        rule=_text,
        file=_text,
        document=st.integers(min_value=0, max_value=5),
        path=_text,
        value=_json,
        old=_json,
    ),
    max_size=6,
)


def _model_dump(cd: Resource | None, m: FluxMutation) -> dict[str, Any]:
    """What the XRD's model writes for the same ConfigData result."""
    return StatusConfigData(
        resource=cd.name if cd else None,
        substitutions=[
            StatusSubstitution(
                rule=t.rule,
                file=t.file,
                document=t.document,
                path=t.path,
                value=status._json_value(t.value),
            )
            for t in m.trace
        ],
        skipped=list(m.skipped),
        unusedValues=list(m.unused_values),
    ).model_dump(**status._DUMP)


@given(
    name=st.none() | st.text(min_size=1, max_size=10),
    trace=_traces,
    skipped=st.lists(_text, max_size=3),
    unused=st.lists(_text, max_size=3),
)
def test_configdata_status_is_what_the_model_dumps(
    name: str | None, trace: list[Trace], skipped: list[str], unused: list[str]
) -> None:
    cd = (
        None
        if name is None
        else Resource(name=name, version="1.0.0", type="configdata", relation="local", access={})
    )
    m = FluxMutation(trace=tuple(trace), skipped=tuple(skipped), unused_values=tuple(unused))
    got = status._configdata_dumped(cd, m)
    want = _model_dump(cd, m)
    assert got == want
    assert list(got) == list(want)  # the same key order: the XR status is written as built
    assert [list(s) for s in got["substitutions"]] == [list(s) for s in want["substitutions"]]
