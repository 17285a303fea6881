"""Define tools, print what the model is shown, and see a broken tool rejected.

``@tool`` checks a definition when it is applied (when a module is imported): a broken tool
raises one error listing every problem, each with a kind and a hint.

Run: python examples/define_tools.py
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from tdk import Toolkit, tool
from tdk.errors import ToolDefinitionError


class Location(BaseModel):
    """A place on Earth."""

    city: str
    country: str = "FR"


@tool
def forecast(
    where: Location,
    days: Annotated[int, Field(ge=1, le=14)] = 3,
    units: Literal["metric", "imperial"] = "metric",
) -> list[float]:
    """Forecast the daily maximum temperature.

    Args:
        where: The place to forecast.
        days: How many days ahead.
        units: Celsius (metric) or Fahrenheit (imperial).
    """
    return [21.5] * days


@tool(name="air-quality", requires_secrets=["AQ_API_KEY"], timeout=5)
async def air_quality(city: Annotated[str, "The city's name."]) -> int:
    """Tell the air quality index of a city (0 is best)."""
    return 42


def broken_tool() -> None:
    """Define a tool with four mistakes; @tool reports all of them at once."""

    @tool(timeout=0)
    def lookup(query, limit: int = "ten"):
        """Look something up.

        Args:
            query: What to look up.
            limit: How many results.
        """


def main() -> None:
    toolkit = Toolkit("weather", [forecast, air_quality])
    for definition in toolkit.definitions():
        print(f"# {definition.name} (toolkit {definition.toolkit})")
        print(definition.description)
        print(json.dumps(definition.input_schema, indent=2))

    try:
        broken_tool()
    except ToolDefinitionError as error:
        print("# a broken tool")
        print(error)
        print(json.dumps(error.to_dict(), indent=2))


if __name__ == "__main__":
    main()
