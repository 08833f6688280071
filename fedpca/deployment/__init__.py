"""Run fedpca as a real Flower deployment: certificates, keys, SuperLink and SuperNodes.

* :mod:`fedpca.deployment.certs`: the CA, the SuperLink's TLS certificate and each site's
  EC P-384 authentication key (OpenSSH format), made with ``cryptography``;
* :mod:`fedpca.deployment.local`: :class:`~fedpca.deployment.local.LocalDeployment`, the
  whole deployment on loopback (TLS, SuperNode authentication, one SuperNode per site);
* :mod:`fedpca.deployment.launch`: a started Flower process and its log, ``--run-config``
  text, an App's declared keys, loopback ports;
* :mod:`fedpca.deployment.processes`: find and stop processes by PID through ``/proc``;
* :mod:`fedpca.deployment.command`: ``python -m fedpca.deployment certs|site-key|local``
  (see ``deploy/README.md``).
"""
