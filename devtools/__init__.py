"""Developer tools: ``manage.py run_embedded`` (the whole product on one machine, ``make run``)
and the demo site it registers against the MAAS simulator. Not part of the production image."""
