-- One search term over the last 7 and 28 complete days: hits, estimated clicks (hits x ctr
-- summed, whole), the rate of those clicks, searches without a click and the gap rank (1: the
-- term searched most without a click), the page clicked most (on the day the term had most
-- hits), the last search, and whether it is new this week (null unless the 21 days before were
-- exported).
with totals as (
    {{ aged(source('docpipe', 'search_totals'), 'searches', 28) }}
),

coverage as (
    select
        project,
        {{ total('case when age < 7 then 1 else 0 end') }} as days_7d,
        {{ total('case when age >= 7 then 1 else 0 end') }} as days_prev_21d
    from totals
    group by project
),

last_days as (
    select project, max(last_day) as last_day
    from totals
    group by project
),

rows as (
    select
        s.project,
        s.search_query,
        s.hits,
        s.top_clicked_page,
        s.last_searched_at,
        s.date,
        cast(s.hits as {{ double() }}) * s.ctr as clicks,
        l.last_day,
        {{ days_between('s.date', 'l.last_day') }} as age
    from ({{ complete_rows(source('docpipe', 'searches'), 'searches') }}) as s
    inner join last_days as l on l.project = s.project
    where {{ days_between('s.date', 'l.last_day') }} between 0 and 27
),

top_pages as (
    select project, search_query, top_clicked_page
    from (
        select
            project,
            search_query,
            top_clicked_page,
            row_number() over (
                partition by project, search_query order by hits desc, date desc
            ) as n
        from rows
        where top_clicked_page is not null
    ) as ranked
    where n = 1
),

terms as (
    select
        r.project,
        r.search_query,
        min(r.last_day) as last_day,
        {{ total('case when r.age < 7 then r.hits else 0 end') }} as hits_7d,
        coalesce(sum(case when r.age < 7 then r.clicks else 0 end), 0) as clicks_7d,
        {{ total('r.hits') }} as hits_28d,
        coalesce(sum(r.clicks), 0) as clicks_28d,
        {{ total('case when r.age >= 7 then r.hits else 0 end') }} as hits_prev_21d,
        max(r.last_searched_at) as last_searched_at
    from rows as r
    group by r.project, r.search_query
),

estimated as (
    select
        t.*,
        {{ whole('t.clicks_7d') }} as est_clicks_7d,
        {{ whole('t.clicks_28d') }} as est_clicks_28d,
        c.days_prev_21d
    from terms as t
    left join coverage as c on c.project = t.project
)

select
    e.project,
    e.search_query,
    e.last_day,
    e.hits_7d,
    e.est_clicks_7d,
    {{ share('e.est_clicks_7d', 'e.hits_7d') }} as ctr_7d,
    e.hits_7d - e.est_clicks_7d as est_unclicked_7d,
    case when e.hits_7d > 0 then cast(row_number() over (
        partition by e.project
        order by case when e.hits_7d > 0 then 0 else 1 end,
            e.hits_7d - e.est_clicks_7d desc, e.hits_7d desc, e.search_query
    ) as {{ dbt.type_bigint() }}) end as gap_rank_7d,
    e.hits_28d,
    e.est_clicks_28d,
    {{ share('e.est_clicks_28d', 'e.hits_28d') }} as ctr_28d,
    t.top_clicked_page,
    e.last_searched_at,
    case when e.days_prev_21d = 21 then e.hits_7d > 0 and e.hits_prev_21d = 0 end as new_this_week
from estimated as e
left join top_pages as t on t.project = e.project and t.search_query = e.search_query
