"""The Cerebras Wafer-Scale Cluster's appliance, as Kubernetes runs it.

  kubeapi      a small REST client for the WSJob resource (jobs.cerebras.com/v1)
  config       where clients find the cluster server and their credentials
  wsjob        the WSJob object: names, phases, what a client submits
  scheduler    pure first-come-first-served decisions (systems, management node)
  controller   the scheduler's loop against the API (level-triggered)
  agent        each appliance node's runner: starts, watches and stops workloads
  wsjob_client cerebras_pytorch's JobRunner: submit, poll, heartbeat, relay logs
  csctl        the cluster command-line tool
The API server is the state: which systems a job holds is read from the jobs.
"""
