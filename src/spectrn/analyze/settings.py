"""What analysis needs from a run's configuration, typed, with the config's own defaults: ``Settings``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spectrn.analyze.semantics import choose as choose_semantics
from spectrn.analyze.slo import Slo, slos_of
from spectrn.configuration.pricing import price_of
from spectrn.run.records import RunMeta


@dataclass
class Settings:
    """What analysis needs from the run's configuration (typed, with the config's own defaults)."""

    hourly_usd: float
    share: float
    max_error_rate: float
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    window: int | None
    semantics: Any
    time_scale: float
    max_tokens: int | None
    paired: bool
    seed: int = 0
    slos: tuple[Slo, ...] = ()
    price_source: str | None = None  # the price and where it came from (spectrn.configuration.pricing)

    @classmethod
    def of(cls, meta: RunMeta, seed: int = 0, acceptance: Mapping[str, Any] | None = None) -> Settings:
        from spectrn.configuration.catalog import INSTANCES

        cfg = meta.config
        inst = INSTANCES.get(cfg.instance_type)
        catalog = inst.hourly_usd if inst else INSTANCES["trn2.48xlarge"].hourly_usd
        # a recorded config is read leniently: a region without a built-in price falls back to the built-in one
        price = price_of(cfg.instance_type, cfg.pricing.instance_hourly_usd, cfg.pricing.region, catalog) or price_of(
            cfg.instance_type, None, None, catalog
        )
        assert price is not None  # the built-in region always has a built-in price
        hourly = price.hourly_usd
        prov = meta.provenance
        spec_server = prov.servers.get("speculative")
        if spec_server is not None and spec_server.window:
            window: int | None = spec_server.window
        elif spec_server is not None and spec_server.source == "unknown":
            window = None  # a server spectrn did not start, whose window nobody knows: read the stream as observed
        else:
            window = cfg.num_speculative_tokens
        # the server's own signals (metric families, whether they moved) first, then the profile or the config
        semantics = choose_semantics(meta, acceptance).semantics
        return cls(
            hourly_usd=float(hourly),
            price_source=price.text(),
            share=float(cfg.pricing.instances_per_service),
            max_error_rate=float(cfg.bench.max_error_rate),
            slo_ttft_s=cfg.bench.slo_ttft_s,
            slo_tpot_s=cfg.bench.slo_tpot_s,
            window=window,
            semantics=semantics,
            time_scale=prov.time_scale if prov.time_scale > 0 else 1.0,
            max_tokens=meta.max_tokens or cfg.bench.max_tokens,
            paired=meta.engine != "llmperf",
            seed=seed,
            slos=slos_of(cfg.bench.slo, cfg.bench.slo_ttft_s, cfg.bench.slo_tpot_s),
        )
