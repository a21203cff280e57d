"""Print this job's V-IPU partition as the V-IPU server reports it (JSON).

The server answers a partition's owner only: the request carries a MUNGE credential
of this user, as the SDK's tools send it."""

import os
import subprocess
import urllib.request

url = "http://{}:{}/api/v1/partitions/{}".format(
    os.environ["IPUOF_VIPU_API_HOST"], os.environ["IPUOF_VIPU_API_PORT"],
    os.environ["IPUOF_VIPU_API_PARTITION_ID"])
credential = subprocess.run(["munge", "-n"], capture_output=True, text=True,
                            check=True).stdout.strip()
request = urllib.request.Request(url, headers={"Authorization": f"MUNGE {credential}"})
print(urllib.request.urlopen(request).read().decode())
