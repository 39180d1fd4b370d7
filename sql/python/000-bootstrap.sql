-- pgcite_python bootstrap: puts the DB-side venv on sys.path (before the system dist-packages, so the
-- venv's packages win) and sets the offline / thread environment before anything imports torch.
-- Every PL/Python function in this extension runs this once per backend.

CREATE OR REPLACE FUNCTION rag._python_init()
RETURNS text
LANGUAGE plpython3u
SET search_path = pg_catalog, pg_temp
AS $fn$
import glob
import os
import sys

if "pgcite_site" in GD:
    return GD["pgcite_site"]
# rag._config_text: rag.config or the default, never a run-time parameter (42501 if one tries)
root = plpy.execute("SELECT rag._config_text('python_path') AS p")[0]["p"]
ver = "python%d.%d" % sys.version_info[:2]
candidates = [root] if root.rstrip("/").endswith("site-packages") else glob.glob(
    os.path.join(root, "lib", ver, "site-packages"))
site = next((c for c in candidates if os.path.isdir(os.path.join(c, "pgcite_udfs"))), None)
if site is None:
    plpy.error(
        "pgcite_python: no DB-side Python environment with pgcite_udfs at %s (%s)" % (root, ver),
        detail="The setting python_path must name a venv made with the system python (%s) or its site-packages." % ver,
        hint="Run `make setup` and `make install`; a superuser points python_path at the venv with "
        "rag.set_config('python_path', ...).",
        sqlstate="PC001")
if site in sys.path:
    sys.path.remove(site)
sys.path.insert(0, site)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
threads = plpy.execute("SELECT rag._config_text('torch_threads') AS t")[0]["t"]
os.environ["OMP_NUM_THREADS"] = threads
os.environ["MKL_NUM_THREADS"] = threads
GD["pgcite_site"] = site
return site
$fn$;
COMMENT ON FUNCTION rag._python_init() IS
'Internal: finds the DB-side venv (setting python_path from rag.config, default /opt/pgcite/venv; never from a '
'session) and puts it first on sys.path; PC001 with a hint when it is missing.';

CREATE OR REPLACE FUNCTION rag.python_info()
RETURNS jsonb
LANGUAGE plpython3u
SET search_path = pg_catalog, pg_temp
AS $fn$
import json
import sys
site = plpy.execute("SELECT rag._python_init() AS s")[0]["s"]
from pgcite_udfs import embed, udf
return json.dumps({"python": sys.version.split()[0], "executable": sys.executable, "site_packages": site,
                   "model": embed.MODEL_NAME, **udf.model_info(GD)})
$fn$;
COMMENT ON FUNCTION rag.python_info() IS
'The Python that PL/Python embeds, the DB-side venv in use, whether this backend has loaded the model (onnx or '
'torch; the MB of its memory on huge pages) and how many texts it has embedded.';
