"""How episodes run: the one step loop and the backends that drive it.

- :mod:`.episode`: :class:`~.episode.EpisodeStepper` (the only code that steps an
  adapter), :func:`~.episode.run_episode` and the observers that watch it;
- :mod:`.sequential`, :mod:`.parallel` (with :mod:`.pool`, :mod:`.worker`,
  :mod:`.replica`, :mod:`.transport`, :mod:`.search`) and :mod:`.ray_backend`: the
  ``sequential``, ``pool`` and ``ray`` backends, each fed a :class:`~.job.Job` by the
  runner (:func:`workbench.run`) and recording through a :class:`~.sink.RecordSink`;
- :mod:`.gym_env`: a gymnasium view of the same loop; :mod:`.limits`: the machine's
  throughput limit; :mod:`.agreement`: outcome agreement of two runs.
"""
