"""What endpoints cost, computed once (services.pricing.spend): the cost banner (infra.fleet.StudioFleet) and the
Endpoints page (infra.status.StatusReport) follow one rule at one instant, each endpoint's cost so far rounded once so
the rows add up to the total, and "(emulated)" on the local emulator. Every figure here is worked by hand.

The case is the rehearsal's screen: three ml.g6.xlarge endpoints ($1.1267 an hour each) created 20 s ago, the video
one idle at 0 instances. It showed $0.0123 in the banner (the two running ones, from a listing up to 30 s old), $0.0187
as the page's total and 3 × $0.0062 in its table."""

from __future__ import annotations

import pytest

from infra.fleet import StudioFleet
from infra.pricing import Price, load_prices
from infra.status import EndpointStatus, StatusReport
from services.pricing import Metered, spend, usd

RATE = 1.1267  # ml.g6.xlarge in us-east-1, $ per instance-hour
AT = 1_000_000.0
# 20 s of one instance: 1.1267 × 20 / 3600 = 0.0062594… → $0.0063 each
EACH = 0.0063


def test_each_endpoint_is_priced_once_and_the_total_is_their_sum():
    cost = spend([Metered("voice", RATE, 1, AT - 20), Metered("image", RATE, 1, AT - 20),
                  Metered("video", RATE, 0, AT - 20),  # idle now: free now, its 20 s stay in the cost so far
                  Metered("broken", RATE, None, None),  # Failed: bills nothing
                  Metered("unpriced", None, 1, AT - 20)], at=AT)
    assert cost.so_far == {"voice": EACH, "image": EACH, "video": EACH, "broken": None, "unpriced": None}
    assert cost.cost_so_far_usd == 0.0189 == round(3 * EACH, 4)  # what the rows show, added up
    assert [usd(v) for v in cost.so_far.values() if v is not None] == ["$0.0063"] * 3 and usd(0.0189) == "$0.0189"
    assert cost.per_hour == {"voice": RATE, "image": RATE, "video": 0.0, "broken": None, "unpriced": None}
    assert cost.usd_per_hour == pytest.approx(2.2534)  # 2 × 1.1267
    assert cost.of(["voice", "video"]).cost_so_far_usd == 0.0126
    assert cost.label("Cost so far") == "Cost so far" and not cost.emulated
    # two instances of one endpoint bill twice per hour; its cost so far is the list price since its creation
    two = spend([Metered("voice", RATE, 2, AT - 3600)], at=AT, emulated=True)
    assert two.usd_per_hour == pytest.approx(2.2534) and two.cost_so_far_usd == 1.1267
    assert two.label("Cost so far") == "Cost so far (emulated)"


def _row(role: str, instances: int, status: str = "InService") -> EndpointStatus:
    return EndpointStatus(role, f"omni-studio-{role}", status, "ml.g6.xlarge", 20.0,
                          Price("ml.g6.xlarge", "us-east-1", RATE, "table"), cost_so_far_usd=None,
                          current_instances=instances, created_at=AT - 20)


def test_the_banner_and_the_endpoints_page_show_the_same_cost_labelled_emulated():
    rows = [_row("voice", 1), _row("image", 1), _row("video", 0)]
    fleet = StudioFleet("us-east-1", [("dep-1", r) for r in rows], load_prices(), emulated=True)
    status = StatusReport("us-east-1", "dep-1", rows, load_prices(), emulated=True)
    banner = fleet.to_dict(at=AT)
    page = status.spend(at=AT)
    assert banner["cost_so_far_usd"] == page.cost_so_far_usd == 0.0189  # not 0.0123 (running only) nor 0.0187
    assert sum(page.so_far.values()) == pytest.approx(page.cost_so_far_usd, abs=1e-12)  # the table adds up
    assert banner["usd_per_hour"] == pytest.approx(2.2534) == pytest.approx(page.usd_per_hour)
    assert banner["emulated"] is True and page.label("cost so far") == "cost so far (emulated)"
    assert banner["running"] == 2 and banner["idle"] == ["video"]  # what the banner says runs: unchanged
    # later, the same listing gives the cost of that moment (the banner's listing is kept 30 s; its cost is not)
    assert fleet.to_dict(at=AT + 3600 - 20)["cost_so_far_usd"] == round(3 * RATE, 4)
