"""popdist.poptorch.Options: poptorch.Options set up for this poprun instance."""

from __future__ import annotations

import poptorch

import popdist


class Options(poptorch.Options):
    def __init__(self, ipus_per_replica: int | None = None) -> None:
        super().__init__()
        self.replicationFactor(popdist.getNumLocalReplicas())
        if popdist.getNumInstances() > 1:
            self.Distributed.configureProcessId(popdist.getInstanceIndex(),
                                                popdist.getNumInstances())
        self._values["ipus_per_replica"] = ipus_per_replica or popdist.getNumIpusPerReplica()
