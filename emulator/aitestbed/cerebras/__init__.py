"""The Cerebras Wafer-Scale Cluster room: the CS-2 and its appliance, as Kubernetes runs it.

  cs2          the CS-2 model: cores, memory, what fits, batch per system
  timing       compile times and throughput calibrated to the documented runs
  kubeapi      a small REST client for the WSJob resource (jobs.cerebras.com/v1)
  config       where clients find the cluster server and their credentials
  wsjob        the WSJob object: names, phases, what a client submits
  scheduler    pure first-come-first-served decisions (systems, management node)
  controller   the scheduler's loop against the API (level-triggered)
  agent        each appliance node's runner: starts, watches and stops workloads
  node_setup   a login node's start-up step (the usernode config, credentials)
  csctl        the cluster command-line tool
  cancel_wsjobs offboarding: cancel a leaving user's unfinished wsjobs (as an admin)
The API server is the state: which systems a job holds is read from the jobs.
cerebras_pytorch's job runner (cerebras_pytorch.appliance.kubernetes_runner) is
the facade's side and imports this room, never the other way round.
"""
