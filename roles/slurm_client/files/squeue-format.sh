# Managed by aitestbed (roles/slurm_client): the site's squeue layout for this host's
# Slurm cluster, when it has one (slurm_clusters.<name>.squeue_format in the inventory,
# written to /etc/slurm/aitestbed.json at start). The SN30 cluster's widens NAME to 25
# characters, as squeue prints on the SN30 login node in the guide. `squeue -o` and a
# user's own SQUEUE_FORMAT still win.
if [ -z "${SQUEUE_FORMAT:-}" ] && [ -r /etc/slurm/aitestbed.json ]; then
    aitestbed_squeue_format=$(sed -n 's/^ *"squeue_format": "\([^"\\]*\)",\{0,1\}$/\1/p' \
        /etc/slurm/aitestbed.json)
    if [ -n "$aitestbed_squeue_format" ]; then
        SQUEUE_FORMAT=$aitestbed_squeue_format
        export SQUEUE_FORMAT
    fi
    unset aitestbed_squeue_format
fi
