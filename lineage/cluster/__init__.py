"""The same jobs on a Spark cluster with a shared Iceberg REST catalog and an object store.

:mod:`lineage.cluster.stack` runs such a stack on one machine (S3Proxy, Iceberg's REST catalog server,
Spark standalone master and workers, history server); :mod:`lineage.cluster.submit` builds the
``spark-submit`` command line that ships our package and jars to any cluster.
``python -m lineage.cluster --help`` lists the commands.
"""
