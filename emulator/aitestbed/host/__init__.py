"""Code that runs on the host, never in a node: it needs Docker, click, Ansible or Jinja.

  lifecycle      up / down / destroy with the Docker provider; UpResult
  images         the base, OS-layer and per-class images (content-hash tags)
  state          a cluster's state directory: record, secrets, rendered files
  inventory      the profile through ansible-inventory: Topology, Node
  engine, naming the Docker engine and the names of containers, volumes, networks
  health         readiness: every node's health.d checks (status, wait)
  playbook       ansible-playbook with the Mitogen strategy against a cluster
  sshconfig, relay, passcode
                 the users' ssh config and logins, the emulated MobilePASS+ app
  accounts       the account and project registry (onboarding as code)
  systems        the systems registry (one entry per system; cerebras_pki, the
                 appliance's CA and certificates)
  slurmconf      each Slurm cluster's configuration, rendered from the roles' templates
  sdk_artifacts, wheels
                 the SDK wheels and datasets the image build puts in /software
  errors         AitestbedError: one clear line for the CLI
Imports run downward only: host may use the rooms and the kernel, never the reverse.
"""
