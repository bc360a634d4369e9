"""Deploy, watch, diagnose, report and tear down spectrn's services, through ``spectrn.kube.api.KubeApi``.


The flow of ``spectrn deploy``:

    render -> plan -> preflight -> apply (dependency order) -> wait (live view) -> diagnose on failure

* **plan**: every rendered object is stamped with ``spectrn.io/spec-hash`` (a hash of the rendered object)
  and compared with the live one: ``create``, ``update`` or ``unchanged``. Unchanged objects are not sent,
  so re-running with the same configuration changes nothing, and a new window changes only the
  speculative Deployment's template (the only object whose rendering depends on it), which rolls that
  service alone. A pre-existing namespace that spectrn did not create is used but never adopted
  (``keep``), so teardown can never delete it; any other same-named object not managed by spectrn is a
  pre-flight error rather than something to overwrite.
* **preflight**: permissions (SelfSubjectAccessReview), API groups for the resources mode (DRA
  ``resource.k8s.io/v1`` / ``v1beta1`` and the ``neuron.aws.com`` DeviceClass, or the device plugin's
  ``aws.amazon.com/neuron``), the CSI driver of any rendered PersistentVolume, and Neuron capacity.
* **apply**: server-side apply in dependency order. If an apply fails part-way, the objects this call
  *created* are deleted again (objects that existed before are left as they are) and the error lists
  exactly what was applied, what was rolled back and what was left.
* **wait**: per service: Creating -> Scheduling -> Pulling -> Starting/Compiling -> Ready, from the
  Deployment status, pod conditions, container states, events and the last log line. Watches wake the loop
  early; a 410 Gone or a dropped connection just means a re-list.
* **diagnose**: Unschedulable (insufficient Neuron devices, claim not allocatable), ImagePullBackOff,
  CrashLoopBackOff (with the last log lines), OOMKilled and startup-probe failures/timeouts each become a
  ``DeployError`` naming the cause, the pod's recent events and log lines, and the next step.

Teardown deletes only objects labelled ``app.kubernetes.io/managed-by=spectrn`` (cluster-scoped ones also
need ``spectrn.io/namespace=<namespace>``), and deletes the namespace only when spectrn created it and
nothing else lives in it.
"""
