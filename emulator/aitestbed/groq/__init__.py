"""The GroqRack room: everything of the emulated GroqCards in one place.

  card         the GroqNode model: eight GroqCards (one GroqChip each) per node, their
               names, PCI addresses and device files
  timing       compile and run times calibrated to the documented runs
  tspd/        the per-node root daemon that owns the node's cards: state, server (wire),
               client; PBS's prologue gives a job cards, its processes open sessions on them
  pbs_hooks    the nodes' PBS prologue / epilogue: a job's cards from tspd
  runtime      what the GroqFlow facade asks: the chips this process may use, a session on them
  tsp_ctl, lspci
               the system tools that ask tspd (`tsp-ctl status|health-check|clear`, `lspci -n`)
"""
