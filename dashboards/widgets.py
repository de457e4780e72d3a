"""Thin wrappers around grafana-foundation-sdk 0.0.21 builders: the panel kinds our dashboards use.

Every panel and annotation queries `${datasource}`, never a fixed datasource uid.
"""

import json
from typing import Any

from grafana_foundation_sdk.builders import bargauge, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.builders.common import (
    GraphThresholdsStyleConfig,
    ReduceDataOptions,
    VizLegendOptions,
)
from grafana_foundation_sdk.builders.dashboard import (
    AnnotationQuery,
    Dashboard,
    DashboardLink,
    DatasourceVariable,
    TextBoxVariable,
    ThresholdsConfig,
)
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    DataSourceRef,
    GraphThresholdsStyleMode,
    LegendDisplayMode,
    LegendPlacement,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardLinkType,
    DataTransformerConfig,
    Threshold,
    ThresholdsMode,
    ValueMap,
    ValueMappingResult,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")  # never a fixed uid
Query = tuple[str, str]  # (PromQL, legend)
AnyPanel = Any  # the SDK's panel builders share no public base class


def _with_queries(panel: AnyPanel, queries: list[Query], fmt: PromQueryFormat | None) -> AnyPanel:
    for i, (expr, legend) in enumerate(queries):
        query = Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i))
        if fmt is PromQueryFormat.TABLE:
            query = query.format(fmt).instant()
        panel = panel.with_target(query)
    return panel


def _thresholds(*steps: tuple[float | None, str]) -> ThresholdsConfig:
    return (
        ThresholdsConfig()
        .mode(ThresholdsMode.ABSOLUTE)
        .steps([Threshold(value=v, color=c) for v, c in steps])
    )


def _legend() -> VizLegendOptions:
    return (
        VizLegendOptions()
        .show_legend(True)
        .display_mode(LegendDisplayMode.LIST)
        .placement(LegendPlacement.BOTTOM)
    )


def graph(title: str, description: str, queries: list[Query], unit: str = "short") -> AnyPanel:
    """A time series panel."""
    panel = timeseries.Panel().title(title).description(description).datasource(DS).unit(unit)
    panel = panel.min(0).legend(_legend()).height(8).span(12)
    return _with_queries(panel, queries, None)


def with_line(panel: AnyPanel, value: float, color: str = "red") -> AnyPanel:
    """Draw a dashed threshold line at `value` (e.g. the guide's 0.9 token usage)."""
    dashed = GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.DASHED)
    return panel.thresholds(_thresholds((None, "green"), (value, color))).thresholds_style(dashed)


def single(title: str, description: str, queries: list[Query], unit: str = "short") -> AnyPanel:
    """A stat panel showing the last value."""
    panel = stat.Panel().title(title).description(description).datasource(DS).unit(unit)
    panel = panel.reduce_options(ReduceDataOptions().calcs(["lastNotNull"])).height(5).span(6)
    return _with_queries(panel, queries, None)


def listing(title: str, description: str, queries: list[Query], no_value: str) -> AnyPanel:
    """A table of label sets from an instant query (the value column hidden)."""
    panel = table.Panel().title(title).description(description).datasource(DS)
    hide = {"excludeByName": {"Time": True, "Value": True}}
    panel = panel.with_transformation(DataTransformerConfig(id_val="organize", options=hide))
    panel = panel.no_value(no_value).height(8).span(12)
    return _with_queries(panel, queries, PromQueryFormat.TABLE)


def states(title: str, description: str, queries: list[Query], names: dict[str, str]) -> AnyPanel:
    """A state timeline: numeric states mapped to text and colour."""
    colors = {"0": "red", "1": "green", "2": "yellow"}
    mapping = ValueMap(
        options={
            k: ValueMappingResult(text=v, color=colors[k], index=int(k)) for k, v in names.items()
        }
    )
    panel = statetimeline.Panel().title(title).description(description).datasource(DS)
    panel = panel.mappings([mapping]).height(8).span(12)
    return _with_queries(panel, queries, None)


def bars(title: str, description: str, queries: list[Query]) -> AnyPanel:
    """A bar gauge of the last value per series, coloured by the health-score bands."""
    panel = bargauge.Panel().title(title).description(description).datasource(DS)
    bands = _thresholds((None, "red"), (61, "yellow"), (95, "green"))
    panel = panel.min(0).max(100).thresholds(bands).height(8).span(12)
    return _with_queries(
        panel.reduce_options(ReduceDataOptions().calcs(["lastNotNull"])), queries, None
    )


def advice_annotation(selector: str) -> AnnotationQuery:
    """A region on every time series while an advice is firing: its start and end are visible."""
    expr = f"max by (target, rule, severity) (sglang_tuner_advice_active{selector}) == 1"
    return (
        AnnotationQuery()
        .name("Advice firing")
        .datasource(DS)
        .enable(True)
        .icon_color("orange")
        .expr(expr)
        .step("30s")
        .title_format("{{rule}} ({{severity}})")
        .text_format("sglang-tuner advice on {{target}}")
        .tag_keys("target,rule,severity")
        .use_value_for_time(False)
    )


def change_annotation(selector: str) -> AnnotationQuery:
    """A mark where a change of tuning flags was judged, titled with its verdict."""
    expr = f"increase(sglang_tuner_changes_total{selector}[1m]) > 0"
    return (
        AnnotationQuery()
        .name("Flag change judged")
        .datasource(DS)
        .enable(True)
        .icon_color("blue")
        .expr(expr)
        .step("60s")
        .title_format("change: {{verdict}}")
        .text_format("a change of tuning flags on {{target}} was judged {{verdict}} (GET /changes)")
        .tag_keys("target,verdict")
        .use_value_for_time(False)
    )


def datasource_variable() -> DatasourceVariable:
    """`${datasource}`: any Prometheus the viewer picks (no uid baked into the JSON)."""
    return DatasourceVariable("datasource").label("Prometheus").type("prometheus")


def tuner_url_variable() -> TextBoxVariable:
    """`${tuner_url}`: where the daemon's API is, for the links to advice, changes, runbooks."""
    return (
        TextBoxVariable("tuner_url")
        .label("sglang-tuner API")
        .default_value("http://localhost:9877")
        .description("The daemon's external_url: the advice, changes and runbook links use it")
    )


def links() -> list[DashboardLink]:
    """Every sglang-tuner dashboard, and the daemon's own pages (advice, changes, rules)."""
    dashboards = (
        DashboardLink("sglang-tuner dashboards")
        .type(DashboardLinkType.DASHBOARDS)
        .tags(["sglang-tuner"])
        .as_dropdown(False)
        .include_vars(True)
        .keep_time(True)
    )
    pages = [("Advice", "/advice?format=text"), ("Changes", "/changes?format=text"),
             ("Rules and runbooks", "/rules")]  # fmt: skip
    return [dashboards] + [
        DashboardLink(title)
        .type(DashboardLinkType.LINK)
        .url(f"${{tuner_url}}{path}")
        .target_blank(True)
        .icon("doc")  # fmt: skip
        for title, path in pages
    ]


def base(uid: str, title: str, description: str) -> Dashboard:
    """Common dashboard settings: datasource and daemon variables, links to each other."""
    return (
        Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["sglang", "sglang-tuner"])
        .refresh("30s")
        .time("now-1h", "now")
        .with_variable(datasource_variable())
        .with_variable(tuner_url_variable())
        .links(links())
    )


def render(dashboard: Dashboard) -> str:
    """Dashboard JSON with panel ids 1..n in layout order (the SDK leaves them unset)."""
    data = json.loads(json.dumps(dashboard.build(), cls=JSONEncoder, sort_keys=True))
    for number, panel in enumerate(data["panels"], start=1):
        panel["id"] = number
    return json.dumps(data, sort_keys=True, indent=2) + "\n"
