/*
 * Graphcore's `--ipus=N` for srun, sbatch, salloc and `#SBATCH` lines.
 *
 * Slurm stores the option in the job's SPANK environment
 * (_SLURM_SPANK_OPTION_ipus_ipus=N); job_submit.lua turns it into the
 * count-only GRES `ipu:N`. In the job (remote context) this plugin tells the
 * SDKs where their IPUs are: the V-IPU server and the partition
 * `slurm_<jobid>` the controller's prolog created for the job.
 *
 * plugstack.conf: required spank_ipus.so vipu_host=HOST vipu_port=PORT
 * (slurm_spank_init must register the option itself: a static spank_options
 * table is ignored by sbatch and salloc in Slurm 22.05.)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(ipus, 1);

static long ipus;
static char vipu_host[256] = "vipu";
static char vipu_port[16] = "8090";

static int ipus_option_cb(int val, const char *optarg, int remote);

static struct spank_option ipus_option = {
	"ipus", "N",
	"Number of IPUs for the job: a V-IPU partition slurm_<jobid> holding "
	"exactly N IPUs is made for it (Graphcore POD64)",
	1, 0, ipus_option_cb
};

/*
 * Only the form is checked here. How many IPUs a job may have is the
 * scheduler's to say, as with Graphcore's own select plugin: more than a host
 * or the POD holds gets Slurm's "Requested node configuration is not
 * available", as --gres over-requests do.
 */
static int ipus_option_cb(int val, const char *optarg, int remote)
{
	char *end = NULL;
	long n;

	(void) val;
	(void) remote;
	errno = 0;
	n = optarg ? strtol(optarg, &end, 10) : 0;
	if (optarg && *optarg && !*end && errno == ERANGE) {
		slurm_error("Invalid --ipus specification: '%s' (too large a number)", optarg);
		return ESPANK_BAD_ARG;
	}
	if (!optarg || !*optarg || *end || n < 1) {
		slurm_error("Invalid --ipus specification: '%s' (a whole number of IPUs, 1 or more)",
			    optarg ? optarg : "");
		return ESPANK_BAD_ARG;
	}
	ipus = n;
	return ESPANK_SUCCESS;
}

static void parse_args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (!strncmp(av[i], "vipu_host=", 10))
			snprintf(vipu_host, sizeof(vipu_host), "%s", av[i] + 10);
		else if (!strncmp(av[i], "vipu_port=", 10))
			snprintf(vipu_port, sizeof(vipu_port), "%s", av[i] + 10);
		else
			slurm_error("spank_ipus: unknown argument '%s'", av[i]);
	}
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	parse_args(ac, av);
	return spank_option_register(sp, &ipus_option);
}

/* In the job, as the user, before its tasks start (batch scripts and steps). */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	uint32_t job_id = 0;
	char value[64];

	(void) ac;
	(void) av;
	if (!spank_remote(sp) || ipus < 1)
		return ESPANK_SUCCESS;
	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
		return ESPANK_ERROR;
	snprintf(value, sizeof(value), "slurm_%u", job_id);
	spank_setenv(sp, "IPUOF_VIPU_API_PARTITION_ID", value, 1);
	spank_setenv(sp, "IPUOF_VIPU_API_HOST", vipu_host, 1);
	spank_setenv(sp, "IPUOF_VIPU_API_PORT", vipu_port, 1);
	snprintf(value, sizeof(value), "%ld", ipus);
	spank_setenv(sp, "SLURM_IPUS", value, 1);
	return ESPANK_SUCCESS;
}
