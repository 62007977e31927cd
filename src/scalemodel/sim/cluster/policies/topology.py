"""Topology-aware: EASY backfill, and a gang is placed inside one node (NVLink domain) when it
fits, else inside the one rack that fits it most tightly, else over the fewest racks; a gang
spread over racks runs slower by the stated spread penalty."""

from . import PolicySpec

POLICY = PolicySpec("topology", "EASY backfill + node/rack-local placement of gangs",
                    queue="easy", placement="topology")
