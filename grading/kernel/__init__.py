"""The grading kernel: where a submission's code runs, and how the grader talks to it.

Four modules, each with one job:

``launcher``
    The kernelspec ``course-sandbox`` runs ``python -I -S grading/kernel/launcher.py -f {connection_file}``
    (a plain script: no site-packages, no folder of the course on its import path, the standard library
    only). It builds the bubblewrap sandbox, sets the resource limits and the kernel's environment, and
    starts the kernel: a cold one (IPython's kernel in the sandbox), or a warm one asked of the template.
``protocol``
    What passes between a launcher and the template (one request per kernel, its exit status back) and
    the system calls both need (``setns``, ``prctl``). Standard library only: the launcher loads it by path.
``warm``
    The template of warm kernels (``python -m grading.kernel.warm``): the course's imports done once, a
    fork per kernel joined to the launcher's sandbox. :func:`grading.kernel.warm.start_template` is the one
    function that starts one.
``client``
    The grader's side: nbgrader's Execute preprocessor (``ResilientExecute``, named in
    ``grading/nbgrader_config.py``) that survives a kernel that dies, bounds what it takes from a kernel,
    and its kernel manager and client.

The layers run one way: ``client`` and ``warm`` use ``launcher`` and ``protocol``; ``launcher`` uses
``protocol`` (by path) alone; nothing here imports the pipeline. ``grading/docs/sandbox.md`` and
``grading/docs/threat-model.md`` say what the sandbox protects.
"""
