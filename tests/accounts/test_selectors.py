from accounts.selectors import user_list_for_tenant, usernames_for_tenant


def test_user_selectors_are_tenant_scoped(analyst, supervisor, outsider, tenant):
    assert list(user_list_for_tenant(tenant_id=tenant.pk)) == [analyst, supervisor]
    assert usernames_for_tenant(tenant_id=tenant.pk, user_ids=[analyst.pk, outsider.pk]) == {
        analyst.pk: "analyst"}


def test_inactive_users_are_left_out_unless_asked(analyst, supervisor, tenant):
    supervisor.is_active = False
    supervisor.save()
    assert list(user_list_for_tenant(tenant_id=tenant.pk)) == [analyst]
    assert list(user_list_for_tenant(tenant_id=tenant.pk, active_only=False)) == [analyst, supervisor]
