"""The hourly instance price a run's cost figures use, and where that price came from.

A built-in price is a list price for one region, taken on one date from AWS's public on-demand pricing page
(``PRICE_SOURCE_URL``); prices differ by region and change over time, so a run in another region must name its
price (``pricing.instance_hourly_usd``) and every cost figure carries the price with its source
(docs/neuron.md, "Price").
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, field_validator

from spectrn.configuration.base import AWS_REGION, Strict

PRICE_SOURCE_URL = "https://aws.amazon.com/ec2/pricing/on-demand/"
# named without its scheme in figures' provenance: reports stay self-contained text, never a link out
PRICE_SOURCE_PAGE = PRICE_SOURCE_URL.removeprefix("https://")
BUILTIN_REGION = "us-east-2"  # the region the catalog's prices were read for (the bucket's default region too)
PRICE_AS_OF = "2026-11-30"  # when the catalog's prices were read (not verified since: docs/neuron.md)


@dataclass(frozen=True)
class Price:
    """One hourly price and its provenance."""

    hourly_usd: float
    source: str  # "config" (pricing.instance_hourly_usd) or "built-in"
    region: str | None
    as_of: str | None
    url: str | None

    def text(self) -> str:
        """``$44.70/h (built-in on-demand list price, us-east-2, as of 2026-11-30, <page>)``."""
        if self.source == "config":
            return f"${self.hourly_usd:.2f}/h (pricing.instance_hourly_usd, set in the run's config)"
        return (
            f"${self.hourly_usd:.2f}/h (built-in on-demand list price, {self.region}, as of {self.as_of}, {self.url})"
        )


def builtin_price(instance_type: str, hourly_usd: float, region: str | None) -> Price | None:
    """The catalog's price for ``instance_type`` in ``region`` (None: no built-in price for that region)."""
    del instance_type  # every built-in price is for BUILTIN_REGION; the type only picks the catalog row
    if region is not None and region != BUILTIN_REGION:
        return None
    return Price(hourly_usd=hourly_usd, source="built-in", region=BUILTIN_REGION, as_of=PRICE_AS_OF,
                 url=PRICE_SOURCE_PAGE)  # fmt: skip


def price_of(instance_type: str, override: float | None, region: str | None, catalog_usd: float) -> Price | None:
    """The price a run uses: the config's override, else the built-in price for its region (None: neither)."""
    if override is not None:
        return Price(hourly_usd=override, source="config", region=region, as_of=None, url=None)
    return builtin_price(instance_type, catalog_usd, region)


# Upper bounds beyond which a value is a typo, not a price: the dearest EC2 instance lists at a few hundred dollars
# an hour, and a service spread over more than 1024 instances is no benchmark (a cost figure from 1e308 instances
# overflows to infinity, which summary.json's schema refuses).
MAX_HOURLY_USD = 10_000.0
MAX_INSTANCES_PER_SERVICE = 1024.0


class Pricing(Strict):
    instance_hourly_usd: float | None = Field(
        default=None,
        gt=0,
        le=MAX_HOURLY_USD,
        description="Instance price per hour (USD, at most 10000: no instance costs more); default: the built-in "
        "on-demand list price for pricing.region (docs/neuron.md, Price). Set it for any other region, a discount "
        "or a reservation.",
    )
    region: str | None = Field(
        default=None,
        description="AWS region whose on-demand price applies; default: the built-in prices' region (us-east-2). "
        "A region without a built-in price needs pricing.instance_hourly_usd.",
    )
    instances_per_service: float = Field(
        default=0.5,
        gt=0,
        le=MAX_INSTANCES_PER_SERVICE,
        description="Share of an instance one service uses (0.5: both services share one trn2.48xlarge); at most "
        "1024 instances.",
    )

    @field_validator("region")
    @classmethod
    def _region(cls, v: str | None) -> str | None:
        if v is not None and not AWS_REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-east-2)")
        return v
