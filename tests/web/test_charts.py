"""The dashboard's SVG bar charts (web/charts.py): geometry, and markup with every text escaped."""

from web.charts import bar_chart


def test_a_chart_draws_a_bar_per_value_scaled_to_the_largest():
    chart = bar_chart(chart_id="chart-x", title="Open", description="Open cases.",
                      rows=[("Cards", [10, 5]), ("Loans", [0, None])], series=[("Open", "bar--open"),
                                                                             ("Overdue", "bar--overdue")])
    svg = str(chart.svg())
    assert svg.startswith('<svg class="chart" viewBox="0 0 360 ')
    assert 'aria-labelledby="chart-x-title chart-x-desc"' in svg
    assert '<title id="chart-x-title">Open</title>' in svg
    assert '<desc id="chart-x-desc">Open cases. The numbers are in the table below.</desc>' in svg
    # The longest bar spans the width less the room for its value (360 - 64); half of it for 5.
    assert '<rect class="bar--open" x="0" y="46" width="296.0" height="14"></rect>' in svg
    assert '<rect class="bar--overdue" x="0" y="63" width="148.0" height="14"></rect>' in svg
    assert ">no data</text>" in svg and svg.count("<rect ") == 2 + 4  # the legend's two keys, four bars
    assert svg.endswith("</svg>")


def test_every_text_in_a_chart_is_escaped_and_long_labels_are_cut():
    label = "<script>alert(1)</script> & a team with a very long name indeed"
    chart = bar_chart(chart_id="chart-y", title="A <b>title</b>", description='"Quoted" & more',
                      rows=[(label, [3])], series=[("Cases & more", "bar--open")], unit="%")
    svg = str(chart.svg())
    assert "<script>" not in svg and "<b>" not in svg
    assert "A &lt;b&gt;title&lt;/b&gt;" in svg and "&quot;Quoted&quot; &amp; more" in svg
    assert ">&lt;script&gt;alert(1)&lt;/script&gt; &amp; a team with…</text>" in svg  # 40 characters
    assert ">3%</text>" in svg
