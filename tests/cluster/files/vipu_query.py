"""Print this job's V-IPU partition as the V-IPU server reports it (JSON)."""

import os
import urllib.request

url = "http://{}:{}/api/v1/partitions/{}".format(
    os.environ["IPUOF_VIPU_API_HOST"], os.environ["IPUOF_VIPU_API_PORT"],
    os.environ["IPUOF_VIPU_API_PARTITION_ID"])
print(urllib.request.urlopen(url).read().decode())
