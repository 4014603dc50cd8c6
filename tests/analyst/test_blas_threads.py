"""The analyst's numeric code runs on one BLAS thread (analyst.classifier): OpenBLAS's own threads
spin while they wait, doubling the CPU a training takes on the 2-core machine and slowing it."""

from threadpoolctl import threadpool_info

import analyst.classifier  # noqa: F401 - loading the analyst sets the limit


def test_every_blas_library_loaded_with_the_analyst_runs_one_thread():
    blas = [library for library in threadpool_info() if library["user_api"] == "blas"]
    assert blas, "numpy's BLAS is loaded with the analyst"
    assert {library["num_threads"] for library in blas} == {1}, blas
